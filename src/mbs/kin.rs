//! Kinematic quantities and scalar coordinates: the one mechanism behind every constraint,
//! force law and output of the engine.
//!
//! A *quantity* is a 3-vector attached to the system: a point fixed in a body, a vector fixed
//! in a body, or the difference of two points. A *scalar coordinate* ξ is a smooth function of
//! a few quantities (dot product, length, angle). From its gradient `g_m` and Hessian `H_mn`
//! with respect to the quantities, the chain rule gives everything the integrators need:
//! `∇_q ξ` (a constraint-Jacobian row, or the direction of a generalized force), `∇²_q ξ`
//! (constraint Hessians, force stiffness), `ξ_t`, `ξ̇` and the convective part of `ξ̈`
//! (the acceleration right-hand side `γ`). Writing each element once as a scalar coordinate
//! keeps all these consistent by construction.

use super::math::{b_mat, b_mul, bt_w_jacobian, unwrap_near};
use super::spec::{BodyKind, BodyRef};
use nalgebra::{Matrix3, Matrix3x4, SMatrix, SVector, Vector3, Vector4};
use serde::{Deserialize, Serialize};

/// Largest number of coordinates a scalar coordinate depends on: two rigid bodies.
pub const LOCAL: usize = 14;
pub type LVec = SVector<f64, LOCAL>;
pub type LMat = SMatrix<f64, LOCAL, LOCAL>;

/// Where each body's coordinates start: rigid bodies `(r, p)` (7), particles `r` (3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    pub offsets: Vec<usize>,
    pub kinds: Vec<BodyKind>,
    pub n_q: usize,
}

impl Layout {
    pub fn new(kinds: &[BodyKind]) -> Layout {
        let mut offsets = Vec::with_capacity(kinds.len());
        let mut n = 0;
        for k in kinds {
            offsets.push(n);
            n += match k {
                BodyKind::Rigid => 7,
                BodyKind::Particle => 3,
            };
        }
        Layout {
            offsets,
            kinds: kinds.to_vec(),
            n_q: n,
        }
    }
    pub fn is_rigid(&self, b: usize) -> bool {
        self.kinds[b] == BodyKind::Rigid
    }
}

/// Positions and velocities of bodies and moving frames at one instant, unpacked once per
/// evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub r: Vec<Vector3<f64>>,
    pub p: Vec<Vector4<f64>>,
    pub a: Vec<Matrix3<f64>>,
    pub rd: Vec<Vector3<f64>>,
    pub pd: Vec<Vector4<f64>>,
    /// Moving frames: position, velocity, acceleration.
    pub frame: Vec<[Vector3<f64>; 3]>,
}

impl Snapshot {
    pub fn resize(&mut self, n_bodies: usize, n_frames: usize) {
        self.r.resize(n_bodies, Vector3::zeros());
        self.p.resize(n_bodies, Vector4::new(1.0, 0.0, 0.0, 0.0));
        self.a.resize(n_bodies, Matrix3::identity());
        self.rd.resize(n_bodies, Vector3::zeros());
        self.pd.resize(n_bodies, Vector4::zeros());
        self.frame.resize(n_frames, [Vector3::zeros(); 3]);
    }

    /// Unpack `q` (and `v` if given; zero otherwise).
    pub fn load(&mut self, layout: &Layout, q: &[f64], v: Option<&[f64]>) {
        for b in 0..layout.kinds.len() {
            let o = layout.offsets[b];
            self.r[b] = Vector3::new(q[o], q[o + 1], q[o + 2]);
            self.rd[b] = v.map_or(Vector3::zeros(), |v| Vector3::new(v[o], v[o + 1], v[o + 2]));
            if layout.is_rigid(b) {
                let p = Vector4::new(q[o + 3], q[o + 4], q[o + 5], q[o + 6]);
                self.p[b] = p;
                self.a[b] = super::math::rot(&p);
                self.pd[b] = v.map_or(Vector4::zeros(), |v| {
                    Vector4::new(v[o + 3], v[o + 4], v[o + 5], v[o + 6])
                });
            }
        }
    }
}

/// A quantity's definition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum QDef {
    /// A point fixed in a body (body coordinates).
    Point(BodyRef, Vector3<f64>),
    /// A direction fixed in a body (body coordinates).
    Vector(BodyRef, Vector3<f64>),
    /// `to − from`, two points.
    Diff {
        from: (BodyRef, Vector3<f64>),
        to: (BodyRef, Vector3<f64>),
    },
}

/// One body's contribution to a quantity's Jacobian: `sign · I` on `r`, or
/// `sign · B(p, local)` on `p`. `B` is not stored (it would triple the size of every
/// quantity, and most evaluations never need it): [`Part::add_jt`] and [`Part::add_to_jac`]
/// form it from the snapshot where it is used.
#[derive(Debug, Clone, Copy)]
enum Part {
    R {
        col: usize,
        sign: f64,
        body: usize,
    },
    P {
        col: usize,
        sign: f64,
        body: usize,
        local: Vector3<f64>,
    },
}

impl Part {
    /// `(global start column, length)` of the block this part touches.
    fn block(&self) -> (usize, usize) {
        match self {
            Part::R { col, .. } => (*col, 3),
            Part::P { col, .. } => (*col, 4),
        }
    }

    /// `out[l..] += Jᵀ w` for this part, its block starting at local index `l`.
    fn add_jt(&self, s: &Snapshot, w: &Vector3<f64>, l: usize, out: &mut LVec) {
        match self {
            Part::R { sign, .. } => {
                let mut view = out.fixed_rows_mut::<3>(l);
                view += *sign * w;
            }
            Part::P {
                sign, body, local, ..
            } => {
                let mut view = out.fixed_rows_mut::<4>(l);
                view += *sign * (b_mat(&s.p[*body], local).transpose() * w);
            }
        }
    }

    /// This part's Jacobian block: `sign · [I 0]` on `r` (fourth column unused) or
    /// `sign · B` on `p`.
    fn jac_block(&self, s: &Snapshot) -> Matrix3x4<f64> {
        match self {
            Part::R { sign, .. } => {
                let mut j = Matrix3x4::zeros();
                for k in 0..3 {
                    j[(k, k)] = *sign;
                }
                j
            }
            Part::P {
                sign, body, local, ..
            } => *sign * b_mat(&s.p[*body], local),
        }
    }
}

/// A quantity evaluated: value, velocity, convective acceleration, explicit time derivatives,
/// and its Jacobian parts.
#[derive(Debug, Clone, Copy)]
pub struct QVal {
    pub x: Vector3<f64>,
    /// Total `ẋ = J v + x_t`.
    pub xd: Vector3<f64>,
    /// `ẍ − J v̇` (includes `x_tt`).
    pub conv: Vector3<f64>,
    pub x_t: Vector3<f64>,
    /// `x_tt`: the moving frames' share of `ẍ` (in `conv` too).
    pub x_tt: Vector3<f64>,
    parts: [Option<Part>; 4],
}

impl QVal {
    fn constant(x: Vector3<f64>) -> QVal {
        QVal {
            x,
            xd: Vector3::zeros(),
            conv: Vector3::zeros(),
            x_t: Vector3::zeros(),
            x_tt: Vector3::zeros(),
            parts: [None; 4],
        }
    }
}

fn eval_point(
    layout: &Layout,
    s: &Snapshot,
    body: BodyRef,
    local: &Vector3<f64>,
    sign: f64,
    with_vel: bool,
) -> QVal {
    match body {
        BodyRef::Ground => QVal::constant(sign * local),
        BodyRef::Frame(f) => {
            let [pos, vel, acc] = s.frame[f];
            QVal {
                x: sign * (pos + local),
                xd: sign * vel,
                conv: sign * acc,
                x_t: sign * vel,
                x_tt: sign * acc,
                parts: [None; 4],
            }
        }
        BodyRef::Body(b) => {
            let o = layout.offsets[b];
            if layout.is_rigid(b) {
                // Without velocities the snapshot's rates are zero, and so are ẋ and the
                // convective term.
                let (xd, conv) = if with_vel {
                    (
                        sign * (s.rd[b] + b_mul(&s.p[b], local, &s.pd[b])),
                        sign * b_mul(&s.pd[b], local, &s.pd[b]),
                    )
                } else {
                    (Vector3::zeros(), Vector3::zeros())
                };
                QVal {
                    x: sign * (s.r[b] + s.a[b] * local),
                    xd,
                    conv,
                    x_t: Vector3::zeros(),
                    x_tt: Vector3::zeros(),
                    parts: [
                        Some(Part::R {
                            col: o,
                            sign,
                            body: b,
                        }),
                        Some(Part::P {
                            col: o + 3,
                            sign,
                            body: b,
                            local: *local,
                        }),
                        None,
                        None,
                    ],
                }
            } else {
                QVal {
                    x: sign * (s.r[b] + local),
                    xd: sign * s.rd[b],
                    conv: Vector3::zeros(),
                    x_t: Vector3::zeros(),
                    x_tt: Vector3::zeros(),
                    parts: [
                        Some(Part::R {
                            col: o,
                            sign,
                            body: b,
                        }),
                        None,
                        None,
                        None,
                    ],
                }
            }
        }
    }
}

fn eval_vector(
    layout: &Layout,
    s: &Snapshot,
    body: BodyRef,
    local: &Vector3<f64>,
    with_vel: bool,
) -> QVal {
    match body {
        BodyRef::Ground | BodyRef::Frame(_) => QVal::constant(*local),
        BodyRef::Body(b) => {
            if !layout.is_rigid(b) {
                return QVal::constant(*local);
            }
            let (xd, conv) = if with_vel {
                (
                    b_mul(&s.p[b], local, &s.pd[b]),
                    b_mul(&s.pd[b], local, &s.pd[b]),
                )
            } else {
                (Vector3::zeros(), Vector3::zeros())
            };
            QVal {
                x: s.a[b] * local,
                xd,
                conv,
                x_t: Vector3::zeros(),
                x_tt: Vector3::zeros(),
                parts: [
                    Some(Part::P {
                        col: layout.offsets[b] + 3,
                        sign: 1.0,
                        body: b,
                        local: *local,
                    }),
                    None,
                    None,
                    None,
                ],
            }
        }
    }
}

pub fn eval_quantity(layout: &Layout, s: &Snapshot, q: &QDef, with_vel: bool) -> QVal {
    match q {
        QDef::Point(b, l) => eval_point(layout, s, *b, l, 1.0, with_vel),
        QDef::Vector(b, l) => eval_vector(layout, s, *b, l, with_vel),
        QDef::Diff { from, to } => {
            let a = eval_point(layout, s, to.0, &to.1, 1.0, with_vel);
            let b = eval_point(layout, s, from.0, &from.1, -1.0, with_vel);
            let mut parts = [None; 4];
            for (k, p) in a.parts.iter().chain(b.parts.iter()).flatten().enumerate() {
                parts[k] = Some(*p);
            }
            QVal {
                x: a.x + b.x,
                xd: a.xd + b.xd,
                conv: a.conv + b.conv,
                x_t: a.x_t + b.x_t,
                x_tt: a.x_tt + b.x_tt,
                parts,
            }
        }
    }
}

impl QDef {
    /// The bodies (or ground, or moving frames) the quantity reads.
    pub fn bodies(&self) -> impl Iterator<Item = BodyRef> {
        let (a, b) = match self {
            QDef::Point(b, _) | QDef::Vector(b, _) => (*b, None),
            QDef::Diff { from, to } => (from.0, Some(to.0)),
        };
        std::iter::once(a).chain(b)
    }
}

/// A scalar coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Coord {
    /// `a · b`.
    Dot(QDef, QDef),
    /// `c1 (a1 · b1) + c2 (a2 · b2)`.
    Combo([(f64, QDef, QDef); 2]),
    /// `½ d · d`.
    HalfSq(QDef),
    /// `|d|`.
    Norm(QDef),
    /// `atan2(y1 · x2, x1 · x2)` on the branch nearest the tracked reference `slot`.
    Angle {
        x1: QDef,
        y1: QDef,
        x2: QDef,
        slot: usize,
    },
}

impl Coord {
    /// The quantities the coordinate is formed from.
    pub fn quantities(&self) -> impl Iterator<Item = &QDef> {
        let (qs, n): ([&QDef; 4], usize) = match self {
            Coord::Dot(a, b) => ([a, b, a, a], 2),
            Coord::Combo([(_, a1, b1), (_, a2, b2)]) => ([a1, b1, a2, b2], 4),
            Coord::HalfSq(d) | Coord::Norm(d) => ([d, d, d, d], 1),
            Coord::Angle { x1, y1, x2, .. } => ([x1, y1, x2, x1], 3),
        };
        qs.into_iter().take(n)
    }
}

/// A scalar coordinate evaluated in its local coordinate space (at most [`LOCAL`] columns,
/// in up to four blocks of consecutive global columns).
#[derive(Debug, Clone)]
pub struct CoordVal {
    pub val: f64,
    /// `ξ̇ = ∇ξ · v + ξ_t`.
    pub rate: f64,
    /// `ξ_t`.
    pub xi_t: f64,
    /// `ξ̈ − ∇ξ · v̇ = vᵀ∇²ξ v + 2 ∇ξ_t · v + ξ_tt`.
    pub conv: f64,
    pub grad: LVec,
    /// `∇_q ξ_t` (local).
    pub grad_t: LVec,
    /// `(global start column, length)` of the blocks; local index = concatenation.
    pub blocks: [(usize, usize); 4],
    pub n_blocks: usize,
}

impl CoordVal {
    /// Local coordinates → global: `(local index, global column)`.
    pub fn columns(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut base = 0;
        self.blocks[..self.n_blocks]
            .iter()
            .flat_map(move |&(col, len)| {
                let b = base;
                base += len;
                (0..len).map(move |k| (b + k, col + k))
            })
    }

    /// The `(local, global)` column pairs as a fixed array (no allocation) and their count.
    pub fn column_array(&self) -> ([(usize, usize); LOCAL], usize) {
        let mut out = [(0, 0); LOCAL];
        let mut n = 0;
        for c in self.columns() {
            out[n] = c;
            n += 1;
        }
        (out, n)
    }

    /// Number of local coordinates in use.
    pub fn n_local(&self) -> usize {
        self.blocks[..self.n_blocks].iter().map(|b| b.1).sum()
    }

    /// Gather a global vector into local coordinates.
    pub fn gather(&self, v: &[f64]) -> LVec {
        let mut out = LVec::zeros();
        for (l, g) in self.columns() {
            out[l] = v[g];
        }
        out
    }
}

/// Hessian blocks `∂²ξ/∂x_m∂x_n` of a scalar with respect to its quantities.
type HBlocks = [[Matrix3<f64>; 4]; 4];

/// Up to four quantities with the scalar's value and gradient with respect to them. Filled in
/// place by [`form`]; the Hessian blocks live apart (only formed when needed).
struct QForm {
    qs: [QVal; 4],
    n: usize,
    val: f64,
    g: [Vector3<f64>; 4],
}

impl QForm {
    fn empty() -> QForm {
        QForm {
            qs: [QVal::constant(Vector3::zeros()); 4],
            n: 0,
            val: 0.0,
            g: [Vector3::zeros(); 4],
        }
    }
}

/// Gradient/Hessian of `a·b` placed at quantity indices `ia`, `ib`, scaled by `c`.
fn add_dot(f: &mut QForm, h: Option<&mut HBlocks>, c: f64, ia: usize, ib: usize) {
    let (a, b) = (f.qs[ia].x, f.qs[ib].x);
    f.g[ia] += c * b;
    f.g[ib] += c * a;
    if let Some(h) = h {
        h[ia][ib] += c * Matrix3::identity();
        h[ib][ia] += c * Matrix3::identity();
    }
}

/// Evaluate the quantities of `coord` into `f`, then the scalar's value and gradient. The
/// Hessian blocks are written into `h` (set to `Some`) when `want_h`, or when a quantity
/// moves explicitly in time and `h_if_moving` (`∇ξ_t` needs them); otherwise `h` is left
/// `None` and the 1 KB of blocks are never touched.
#[allow(clippy::too_many_arguments)]
fn form(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    with_vel: bool,
    want_h: bool,
    h_if_moving: bool,
    f: &mut QForm,
    h: &mut Option<HBlocks>,
) {
    let ev = |d: &QDef| eval_quantity(layout, s, d, with_vel);
    match coord {
        Coord::Dot(a, b) => {
            f.qs[0] = ev(a);
            f.qs[1] = ev(b);
            f.n = 2;
        }
        Coord::Combo([(_, a1, b1), (_, a2, b2)]) => {
            f.qs[0] = ev(a1);
            f.qs[1] = ev(b1);
            f.qs[2] = ev(a2);
            f.qs[3] = ev(b2);
            f.n = 4;
        }
        Coord::HalfSq(d) | Coord::Norm(d) => {
            f.qs[0] = ev(d);
            f.n = 1;
        }
        Coord::Angle { x1, y1, x2, .. } => {
            f.qs[0] = ev(x1);
            f.qs[1] = ev(y1);
            f.qs[2] = ev(x2);
            f.n = 3;
        }
    }
    let need_h = want_h || (h_if_moving && f.qs[..f.n].iter().any(|q| q.x_t != Vector3::zeros()));
    let mut h = if need_h {
        Some(h.insert([[Matrix3::zeros(); 4]; 4]))
    } else {
        None
    };
    let x = |m: usize| f.qs[m].x;
    match coord {
        Coord::Dot(..) => {
            f.val = x(0).dot(&x(1));
            add_dot(f, h, 1.0, 0, 1);
        }
        Coord::Combo([(c1, ..), (c2, ..)]) => {
            f.val = c1 * x(0).dot(&x(1)) + c2 * x(2).dot(&x(3));
            add_dot(f, h.as_deref_mut(), *c1, 0, 1);
            add_dot(f, h, *c2, 2, 3);
        }
        Coord::HalfSq(_) => {
            f.val = 0.5 * x(0).norm_squared();
            f.g[0] = x(0);
            if let Some(h) = h {
                h[0][0] = Matrix3::identity();
            }
        }
        Coord::Norm(_) => {
            let l = x(0).norm().max(1e-300);
            let u = x(0) / l;
            f.val = l;
            f.g[0] = u;
            if let Some(h) = h {
                h[0][0] = (Matrix3::identity() - u * u.transpose()) / l;
            }
        }
        Coord::Angle { slot, .. } => {
            let (s_, c_) = (x(1).dot(&x(2)), x(0).dot(&x(2)));
            let r2 = (s_ * s_ + c_ * c_).max(1e-300);
            f.val = unwrap_near(s_.atan2(c_), refs[*slot]);
            // θ(s, c): θ_s = c/r², θ_c = −s/r², θ_ss = −2cs/r⁴, θ_cc = 2cs/r⁴, θ_sc = (s²−c²)/r⁴.
            let (ts, tc) = (c_ / r2, -s_ / r2);
            // ∇s: (0, x2, y1); ∇c: (x2, 0, x1), over quantities (x1, y1, x2).
            let gs = [Vector3::zeros(), x(2), x(1)];
            let gc = [x(2), Vector3::zeros(), x(0)];
            for m in 0..3 {
                f.g[m] = ts * gs[m] + tc * gc[m];
            }
            if let Some(h) = h {
                let r4 = r2 * r2;
                let (tss, tcc, tsc) = (
                    -2.0 * c_ * s_ / r4,
                    2.0 * c_ * s_ / r4,
                    (s_ * s_ - c_ * c_) / r4,
                );
                for m in 0..3 {
                    for n in 0..3 {
                        h[m][n] = tss * gs[m] * gs[n].transpose()
                            + tcc * gc[m] * gc[n].transpose()
                            + tsc * (gs[m] * gc[n].transpose() + gc[m] * gs[n].transpose());
                    }
                }
                // Second derivatives of s and c themselves: H_s(y1,x2) = I, H_c(x1,x2) = I.
                let i3 = Matrix3::identity();
                h[1][2] += ts * i3;
                h[2][1] += ts * i3;
                h[0][2] += tc * i3;
                h[2][0] += tc * i3;
            }
        }
    }
}

/// Evaluate a scalar coordinate. `v` is needed for `rate`/`conv` (pass zeros otherwise);
/// `refs` are the angle branch references. The coordinate-space Hessian is written into
/// `hess` when given (kept out of the returned value: it is large, and most callers need only
/// the gradient).
///
/// Everything is accumulated body block by body block (`sign · I` or `sign · B`), never
/// through full `3 × LOCAL` quantity Jacobians: those are mostly zeros.
// Quantity indices address several parallel arrays (values, gradient and Hessian blocks);
// index loops read better than zipped iterators here.
pub fn eval_coord(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    v: Option<&[f64]>,
    hess: Option<&mut LMat>,
) -> CoordVal {
    eval_coord_need(layout, s, coord, refs, v, hess, Need::ALL)
}

/// What a caller reads of a [`CoordVal`] besides `val`, `rate` and `xi_t` (always computed).
/// A constraint value needs neither, a force law's argument no `conv`: skipping the gradient
/// saves the `Bᵀ w` products, skipping `conv` the Hessian blocks (about a third of a joint
/// model's residual on the suspension corner went into those for callers that never read
/// them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// `grad` (the gradient).
    pub grad: bool,
    /// `conv` and `grad_t` (both need the Hessian blocks when the scalar moves).
    pub conv: bool,
}

impl Need {
    pub const ALL: Need = Need {
        grad: true,
        conv: true,
    };
    pub const VALUE: Need = Need {
        grad: false,
        conv: false,
    };
    pub const GRAD: Need = Need {
        grad: true,
        conv: false,
    };
}

/// [`eval_coord`] computing only what `need` asks for (with `hess`, everything): the fields
/// it names have the values [`eval_coord`] gives, bit for bit; the others are zero or
/// meaningless.
#[allow(clippy::needless_range_loop)]
pub fn eval_coord_need(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    v: Option<&[f64]>,
    hess: Option<&mut LMat>,
    need: Need,
) -> CoordVal {
    let with_vel = v.is_some();
    let need = if hess.is_some() { Need::ALL } else { need };
    let mut f = QForm::empty();
    let mut h = None;
    form(
        layout,
        s,
        coord,
        refs,
        with_vel,
        (with_vel && need.conv) || hess.is_some(),
        need.conv,
        &mut f,
        &mut h,
    );
    // Local blocks, deduplicated.
    let mut blocks = [(0usize, 0usize); 4];
    let mut nb = 0;
    for q in &f.qs[..f.n] {
        for p in q.parts.iter().flatten() {
            let (col, len) = p.block();
            if !blocks[..nb].iter().any(|b| b.0 == col) {
                blocks[nb] = (col, len);
                nb += 1;
            }
        }
    }
    let local_start = |col: usize| -> usize {
        let mut base = 0;
        for b in &blocks[..nb] {
            if b.0 == col {
                return base;
            }
            base += b.1;
        }
        unreachable!("block registered above")
    };
    let mut grad = LVec::zeros();
    let mut grad_t = LVec::zeros();
    let (mut xi_t, mut rate, mut conv) = (0.0, 0.0, 0.0);
    for m in 0..f.n {
        let q = &f.qs[m];
        if need.grad {
            for p in q.parts.iter().flatten() {
                p.add_jt(s, &f.g[m], local_start(p.block().0), &mut grad);
            }
        }
        xi_t += f.g[m].dot(&q.x_t);
        rate += f.g[m].dot(&q.xd);
        conv += f.g[m].dot(&q.conv);
    }
    if let Some(h) = &h {
        conv = add_second_order(conv, &f, h);
        for m in 0..f.n {
            for n in 0..f.n {
                let hmn = &h[m][n];
                if hmn.iter().all(|x| *x == 0.0) {
                    continue;
                }
                if f.qs[m].x_t != Vector3::zeros() {
                    let w = hmn.transpose() * f.qs[m].x_t;
                    for p in f.qs[n].parts.iter().flatten() {
                        p.add_jt(s, &w, local_start(p.block().0), &mut grad_t);
                    }
                }
            }
        }
    }
    if let Some(hess) = hess {
        let h = h.as_ref().expect("Hessian blocks formed when asked for");
        // Jacobian blocks of the quantities' parts (only here: the Hessian needs Jᵀ H J,
        // formed block by block).
        let mut jb = [[Matrix3x4::zeros(); 4]; 4];
        for m in 0..f.n {
            for (k, p) in f.qs[m].parts.iter().enumerate() {
                if let Some(p) = p {
                    jb[m][k] = p.jac_block(s);
                }
            }
        }
        hess.fill(0.0);
        for m in 0..f.n {
            for n in 0..f.n {
                let hmn = &h[m][n];
                if hmn.iter().all(|x| *x == 0.0) {
                    continue;
                }
                for (a, pa) in f.qs[m].parts.iter().enumerate() {
                    let Some(pa) = pa else { continue };
                    let (ca, la) = pa.block();
                    let la0 = local_start(ca);
                    let jth = jb[m][a].transpose() * hmn;
                    for (b, pb) in f.qs[n].parts.iter().enumerate() {
                        let Some(pb) = pb else { continue };
                        let (cb, lb) = pb.block();
                        let lb0 = local_start(cb);
                        let blk = jth * jb[n][b];
                        for j in 0..lb {
                            for i in 0..la {
                                hess[(la0 + i, lb0 + j)] += blk[(i, j)];
                            }
                        }
                    }
                }
            }
            for p in f.qs[m].parts.iter().flatten() {
                if let Part::P {
                    col, sign, local, ..
                } = p
                {
                    let l = local_start(*col);
                    let mut view = hess.fixed_view_mut::<4, 4>(l, l);
                    view += *sign * bt_w_jacobian(local, &f.g[m]);
                }
            }
        }
    }
    CoordVal {
        val: f.val,
        rate,
        xi_t,
        conv,
        grad,
        grad_t,
        blocks,
        n_blocks: nb,
    }
}

/// One body's share of a scalar coordinate's gradient as a wrench at the world origin:
/// `∂ξ/∂(point) = g` at a world point `x` of the body is the force `g` with the moment `x × g`;
/// `g` on a body-fixed direction `d` is the moment `d × g` alone. A formulation whose bodies
/// move by spatial velocities `V = (ω, v_O)` (joint coordinates) reads the coordinate's
/// rate as `Σ Wᵀ V` and its Jacobian row as the wrenches projected on the joint axes,
/// without the Euler-parameter Jacobians `B` that [`eval_coord`]'s gradient goes through.
#[derive(Debug, Clone, Copy)]
pub struct BodyWrench {
    pub body: usize,
    pub moment: Vector3<f64>,
    pub force: Vector3<f64>,
}

/// A scalar coordinate with its gradient as body wrenches ([`eval_coord_wrenches`]).
#[derive(Debug, Clone, Copy)]
pub struct CoordWrenches {
    pub val: f64,
    /// `ξ̇` (with velocities; else the explicit rate `ξ_t` only).
    pub rate: f64,
    /// As [`CoordVal::conv`] when asked for (`need_conv` and velocities), else meaningless.
    pub conv: f64,
    pub bodies: [BodyWrench; 4],
    pub n: usize,
}

/// [`eval_coord`]'s value, rate and (with `need_conv`) convective term, and the gradient as
/// one [`BodyWrench`] per body (at most four, in the order the bodies first appear). For unit
/// Euler parameters the wrenches are the ones the gradient's `(∂ξ/∂r, ∂ξ/∂p)` give through
/// `ṗ = ½ Eᵀ ω` (equal up to rounding).
#[allow(clippy::needless_range_loop)]
pub fn eval_coord_wrenches(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    with_vel: bool,
    need_conv: bool,
) -> CoordWrenches {
    let mut f = QForm::empty();
    let mut h = None;
    form(
        layout,
        s,
        coord,
        refs,
        with_vel,
        with_vel && need_conv,
        need_conv,
        &mut f,
        &mut h,
    );
    wrenches_of(s, &f, h.as_ref())
}

/// [`eval_coord_wrenches`] (without `conv`) and [`eval_coord_accel`] from one evaluation of
/// the coordinate: what a constraint row gives an acceleration-level system (`G` and `γ`).
pub fn eval_coord_wrenches_accel(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    accel: impl Fn(usize) -> BodyAccel,
) -> (CoordWrenches, f64) {
    let mut f = QForm::empty();
    let mut h = None;
    form(layout, s, coord, refs, true, true, true, &mut f, &mut h);
    (wrenches_of(s, &f, None), accel_of(s, &f, h.as_ref(), accel))
}

/// The wrenches (and value, rate, and with `h` the convective term) of an evaluated form.
fn wrenches_of(s: &Snapshot, f: &QForm, h: Option<&HBlocks>) -> CoordWrenches {
    let zero = BodyWrench {
        body: usize::MAX,
        moment: Vector3::zeros(),
        force: Vector3::zeros(),
    };
    let mut out = CoordWrenches {
        val: f.val,
        rate: 0.0,
        conv: 0.0,
        bodies: [zero; 4],
        n: 0,
    };
    for m in 0..f.n {
        let q = &f.qs[m];
        let g = f.g[m];
        for p in q.parts.iter().flatten() {
            let (body, moment, force) = match *p {
                Part::R { sign, body, .. } => {
                    let gs = sign * g;
                    (body, s.r[body].cross(&gs), gs)
                }
                Part::P {
                    sign, body, local, ..
                } => (
                    (body),
                    (s.a[body] * local).cross(&(sign * g)),
                    Vector3::zeros(),
                ),
            };
            let k = match out.bodies[..out.n].iter().position(|w| w.body == body) {
                Some(k) => k,
                None => {
                    out.bodies[out.n].body = body;
                    out.n += 1;
                    out.n - 1
                }
            };
            out.bodies[k].moment += moment;
            out.bodies[k].force += force;
        }
        out.rate += g.dot(&q.xd);
        out.conv += g.dot(&q.conv);
    }
    if let Some(h) = h {
        out.conv = add_second_order(out.conv, f, h);
    }
    out
}

/// `sum + Σ ẋ_mᵀ H_mn ẋ_n`: the scalar's second-order part of `ξ̈` added term by term in the
/// order [`eval_coord`] adds it (so the sums agree bit for bit).
#[allow(clippy::needless_range_loop)] // `m`, `n` index the quantities and the Hessian blocks
fn add_second_order(mut sum: f64, f: &QForm, h: &HBlocks) -> f64 {
    for m in 0..f.n {
        for n in 0..f.n {
            let hmn = &h[m][n];
            if hmn.iter().any(|x| *x != 0.0) {
                sum += f.qs[m].xd.dot(&(hmn * f.qs[n].xd));
            }
        }
    }
    sum
}

/// A body's motion for [`eval_coord_accel`]: angular velocity `ω`, angular acceleration `ω̇`
/// and the acceleration of its reference point ([`Snapshot::r`]).
#[derive(Debug, Clone, Copy)]
pub struct BodyAccel {
    pub omega: Vector3<f64>,
    pub omega_dot: Vector3<f64>,
    pub acc: Vector3<f64>,
}

/// `ξ̈` of a scalar coordinate for bodies moving as `accel(body)` says (velocities from the
/// snapshot): `Σ g_m · ẍ_m + Σ ẋ_mᵀ H_mn ẋ_n` with a body point's or direction's
/// `ẍ = a + ω̇ × ρ + ω × (ω × ρ)` (`ρ = A l`, `a` the reference point's acceleration, zero for a
/// direction) and the moving frames' `x_tt`. A formulation with the bodies' accelerations at
/// hand (joint coordinates: the recursion's at `p̈ = 0`) gets `γ` without the
/// Euler-parameter Jacobians; equal to `conv + ∇ξ · q̈_abs` for unit Euler parameters whose
/// `ṗ`, `p̈` match `ω`, `ω̇`.
pub fn eval_coord_accel(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    accel: impl Fn(usize) -> BodyAccel,
) -> f64 {
    let mut f = QForm::empty();
    let mut h = None;
    form(layout, s, coord, refs, true, true, true, &mut f, &mut h);
    accel_of(s, &f, h.as_ref(), accel)
}

/// `ξ̈` of an evaluated form (with velocities) from the bodies' accelerations.
#[allow(clippy::needless_range_loop)]
fn accel_of(
    s: &Snapshot,
    f: &QForm,
    h: Option<&HBlocks>,
    accel: impl Fn(usize) -> BodyAccel,
) -> f64 {
    let mut xi_dd = 0.0;
    for m in 0..f.n {
        let q = &f.qs[m];
        let mut xdd = q.x_tt;
        for p in q.parts.iter().flatten() {
            match *p {
                Part::R { sign, body, .. } => xdd += sign * accel(body).acc,
                Part::P {
                    sign, body, local, ..
                } => {
                    let b = accel(body);
                    let rho = s.a[body] * local;
                    xdd += sign * (b.omega_dot.cross(&rho) + b.omega.cross(&b.omega.cross(&rho)));
                }
            }
        }
        xi_dd += f.g[m].dot(&xdd);
    }
    if let Some(h) = h {
        xi_dd = add_second_order(xi_dd, f, h);
    }
    xi_dd
}

/// The raw (unbranched) value of an angle coordinate, for updating its branch reference.
/// [`raw_angle`] and its rate, from a snapshot with velocities.
pub fn raw_angle_rate(layout: &Layout, s: &Snapshot, coord: &Coord) -> Option<(f64, f64)> {
    if let Coord::Angle { x1, y1, x2, .. } = coord {
        let q = [x1, y1, x2].map(|d| eval_quantity(layout, s, d, true));
        let (sn, c) = (q[1].x.dot(&q[2].x), q[0].x.dot(&q[2].x));
        let sd = q[1].xd.dot(&q[2].x) + q[1].x.dot(&q[2].xd);
        let cd = q[0].xd.dot(&q[2].x) + q[0].x.dot(&q[2].xd);
        let r2 = (sn * sn + c * c).max(1e-300);
        Some((sn.atan2(c), (c * sd - sn * cd) / r2))
    } else {
        None
    }
}

pub fn raw_angle(layout: &Layout, s: &Snapshot, coord: &Coord) -> Option<f64> {
    if let Coord::Angle { x1, y1, x2, .. } = coord {
        let q = [x1, y1, x2].map(|d| eval_quantity(layout, s, d, false));
        Some(q[1].x.dot(&q[2].x).atan2(q[0].x.dot(&q[2].x)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbs::math::{e_mat, rot};

    /// Two rigid bodies and a particle at general poses and rates, and a moving frame.
    fn snapshot() -> (Layout, Snapshot) {
        let layout = Layout::new(&[BodyKind::Rigid, BodyKind::Particle, BodyKind::Rigid]);
        let mut s = Snapshot::default();
        s.resize(3, 1);
        let quats = [
            Vector4::new(0.9, 0.3, -0.2, 0.25).normalize(),
            Vector4::new(1.0, 0.0, 0.0, 0.0),
            Vector4::new(0.4, -0.5, 0.6, 0.3).normalize(),
        ];
        let omegas = [
            Vector3::new(0.7, -1.3, 2.1),
            Vector3::zeros(),
            Vector3::new(-0.4, 0.9, 0.3),
        ];
        for b in 0..3 {
            let k = b as f64;
            s.r[b] = Vector3::new(0.3 + k, -0.2 * k, 0.5 - 0.1 * k);
            s.rd[b] = Vector3::new(0.2 - k, 0.4 * k, -0.3);
            s.p[b] = quats[b];
            s.a[b] = rot(&quats[b]);
            // ṗ = ½ Eᵀ ω: rates in the tangent space of the unit sphere.
            s.pd[b] = 0.5 * e_mat(&quats[b]).transpose() * omegas[b];
        }
        s.frame[0] = [
            Vector3::new(0.1, 0.2, -0.3),
            Vector3::new(0.5, -0.2, 0.1),
            Vector3::new(-1.0, 0.3, 2.0),
        ];
        (layout, s)
    }

    fn coords() -> Vec<Coord> {
        let (b0, b1, b2) = (BodyRef::Body(0), BodyRef::Body(1), BodyRef::Body(2));
        let p0 = (b0, Vector3::new(0.1, -0.2, 0.3));
        let p2 = (b2, Vector3::new(-0.3, 0.2, 0.1));
        let d0 = QDef::Vector(b0, Vector3::new(0.0, 0.6, 0.8));
        let d2 = QDef::Vector(b2, Vector3::new(1.0, 0.0, 0.0));
        vec![
            Coord::Dot(d0, QDef::Diff { from: p0, to: p2 }),
            Coord::Combo([(0.7, d0, d2), (-1.2, QDef::Point(b1, Vector3::zeros()), d2)]),
            Coord::HalfSq(QDef::Diff {
                from: (BodyRef::Frame(0), Vector3::new(0.0, 0.0, 0.1)),
                to: p0,
            }),
            Coord::Norm(QDef::Diff {
                from: (b1, Vector3::zeros()),
                to: p2,
            }),
            Coord::Angle {
                x1: QDef::Vector(b0, Vector3::new(1.0, 0.0, 0.0)),
                y1: QDef::Vector(b0, Vector3::new(0.0, 1.0, 0.0)),
                x2: d2,
                slot: 0,
            },
        ]
    }

    #[test]
    fn needs_give_the_full_evaluation_bit_for_bit() {
        let (layout, s) = snapshot();
        for c in coords() {
            for v in [None, Some(&[][..])] {
                let full = eval_coord(&layout, &s, &c, &[0.0], v, None);
                for need in [Need::VALUE, Need::GRAD, Need::ALL] {
                    let part = eval_coord_need(&layout, &s, &c, &[0.0], v, None, need);
                    assert_eq!(part.val.to_bits(), full.val.to_bits(), "{c:?}");
                    assert_eq!(part.rate.to_bits(), full.rate.to_bits(), "{c:?}");
                    assert_eq!(part.xi_t.to_bits(), full.xi_t.to_bits(), "{c:?}");
                    if need.grad {
                        assert_eq!(part.grad, full.grad, "{c:?}");
                    }
                    if need.conv {
                        assert_eq!(part.conv.to_bits(), full.conv.to_bits(), "{c:?}");
                        assert_eq!(part.grad_t, full.grad_t, "{c:?}");
                    }
                }
            }
        }
    }

    /// `ξ̈` from the bodies' accelerations equals `conv + ∇ξ · q̈_abs` with `p̈` the Euler
    /// parameters' second derivative for the same `ω`, `ω̇` (`p̈ = ½ (Ė(ṗ)ᵀ ω + E(p)ᵀ ω̇)`).
    #[test]
    fn accelerations_from_body_motion_are_the_absolute_ones() {
        let (layout, s) = snapshot();
        let omegas = [
            Vector3::new(0.7, -1.3, 2.1),
            Vector3::zeros(),
            Vector3::new(-0.4, 0.9, 0.3),
        ];
        let accel = |b: usize| BodyAccel {
            omega: omegas[b],
            omega_dot: Vector3::new(0.3 * b as f64 - 0.5, 1.1, -0.7),
            acc: Vector3::new(2.0, -0.5 * b as f64, 0.9),
        };
        // q̈_abs = (r̈, p̈) per body.
        let mut qdd = vec![0.0; layout.n_q];
        for b in 0..3 {
            let o = layout.offsets[b];
            let a = accel(b);
            for k in 0..3 {
                qdd[o + k] = a.acc[k];
            }
            if layout.is_rigid(b) {
                let pdd = 0.5
                    * (e_mat(&s.pd[b]).transpose() * a.omega
                        + e_mat(&s.p[b]).transpose() * a.omega_dot);
                for k in 0..4 {
                    qdd[o + 3 + k] = pdd[k];
                }
            }
        }
        for c in coords() {
            let cv = eval_coord(&layout, &s, &c, &[0.0], Some(&[]), None);
            let expect = cv.conv + cv.grad.dot(&cv.gather(&qdd));
            let got = eval_coord_accel(&layout, &s, &c, &[0.0], accel);
            assert!(
                (got - expect).abs() <= 1e-13 * (1.0 + expect.abs()),
                "{c:?}: {got} against {expect}"
            );
        }
    }

    /// The wrenches are the gradient's `(∂ξ/∂r, ∂ξ/∂p)` mapped through `ṗ = ½ Eᵀ ω`
    /// (moment `r × g_r + ½ E g_p`, force `g_r`), and carry the same value, rate and `conv`.
    #[test]
    fn wrenches_are_the_gradient_at_unit_euler_parameters() {
        let (layout, s) = snapshot();
        for c in coords() {
            for with_vel in [false, true] {
                let v = with_vel.then_some(&[][..]);
                let cv = eval_coord(&layout, &s, &c, &[0.0], v, None);
                let cw = eval_coord_wrenches(&layout, &s, &c, &[0.0], with_vel, true);
                assert_eq!(cw.val.to_bits(), cv.val.to_bits());
                assert_eq!(cw.rate.to_bits(), cv.rate.to_bits());
                if with_vel {
                    assert_eq!(cw.conv.to_bits(), cv.conv.to_bits(), "{c:?}");
                }
                // The gradient split by body.
                let mut expect = [(Vector3::zeros(), Vector3::zeros()); 3];
                let mut touched = [false; 3];
                for (l, g) in cv.columns() {
                    let b = (0..3).rev().find(|&b| layout.offsets[b] <= g).unwrap();
                    let k = g - layout.offsets[b];
                    touched[b] = true;
                    let (m, f) = &mut expect[b];
                    if k < 3 {
                        f[k] += cv.grad[l];
                        let mut e = Vector3::zeros();
                        e[k] = cv.grad[l];
                        *m += s.r[b].cross(&e);
                    } else {
                        let mut ge = Vector4::zeros();
                        ge[k - 3] = cv.grad[l];
                        *m += 0.5 * e_mat(&s.p[b]) * ge;
                    }
                }
                assert_eq!(cw.n, touched.iter().filter(|t| **t).count(), "{c:?}");
                for w in &cw.bodies[..cw.n] {
                    let (m, f) = expect[w.body];
                    let scale = 1.0 + m.norm() + f.norm();
                    assert!((w.moment - m).norm() <= 1e-14 * scale, "{c:?}: {w:?} {m}");
                    assert!((w.force - f).norm() <= 1e-14 * scale, "{c:?}: {w:?} {f}");
                }
            }
        }
    }
}
