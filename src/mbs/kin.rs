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

use super::math::{b_mat, bt_w_jacobian, unwrap_near};
use super::spec::{BodyKind, BodyRef};
use nalgebra::{Matrix3, SMatrix, SVector, Vector3, Vector4};
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

/// One body's contribution to a quantity's Jacobian: `sign · I` on `r`, or `sign · B(p, s')`
/// on `p`.
#[derive(Debug, Clone, Copy)]
enum Part {
    R {
        col: usize,
        sign: f64,
    },
    P {
        col: usize,
        sign: f64,
        local: Vector3<f64>,
        b: nalgebra::Matrix3x4<f64>,
    },
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
    parts: [Option<Part>; 4],
}

impl QVal {
    fn constant(x: Vector3<f64>) -> QVal {
        QVal {
            x,
            xd: Vector3::zeros(),
            conv: Vector3::zeros(),
            x_t: Vector3::zeros(),
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
                parts: [None; 4],
            }
        }
        BodyRef::Body(b) => {
            let o = layout.offsets[b];
            if layout.is_rigid(b) {
                let bm = b_mat(&s.p[b], local);
                let bd = if with_vel {
                    b_mat(&s.pd[b], local)
                } else {
                    nalgebra::Matrix3x4::zeros()
                };
                QVal {
                    x: sign * (s.r[b] + s.a[b] * local),
                    xd: sign * (s.rd[b] + bm * s.pd[b]),
                    conv: sign * (bd * s.pd[b]),
                    x_t: Vector3::zeros(),
                    parts: [
                        Some(Part::R { col: o, sign }),
                        Some(Part::P {
                            col: o + 3,
                            sign,
                            local: *local,
                            b: bm,
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
                    parts: [Some(Part::R { col: o, sign }), None, None, None],
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
            let bm = b_mat(&s.p[b], local);
            let bd = if with_vel {
                b_mat(&s.pd[b], local)
            } else {
                nalgebra::Matrix3x4::zeros()
            };
            QVal {
                x: s.a[b] * local,
                xd: bm * s.pd[b],
                conv: bd * s.pd[b],
                x_t: Vector3::zeros(),
                parts: [
                    Some(Part::P {
                        col: layout.offsets[b] + 3,
                        sign: 1.0,
                        local: *local,
                        b: bm,
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
                parts,
            }
        }
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

/// Up to four quantities with the scalar's gradient and Hessian with respect to them.
struct QForm {
    qs: [QVal; 4],
    n: usize,
    val: f64,
    g: [Vector3<f64>; 4],
    h: [[Matrix3<f64>; 4]; 4],
}

impl QForm {
    fn new(qs: &[QVal], val: f64) -> QForm {
        let mut arr = [qs[0]; 4];
        arr[..qs.len()].copy_from_slice(qs);
        QForm {
            qs: arr,
            n: qs.len(),
            val,
            g: [Vector3::zeros(); 4],
            h: [[Matrix3::zeros(); 4]; 4],
        }
    }
}

/// Gradient/Hessian of `a·b` placed at quantity indices `ia`, `ib`, scaled by `c`.
fn add_dot(f: &mut QForm, c: f64, ia: usize, ib: usize) {
    let (a, b) = (f.qs[ia].x, f.qs[ib].x);
    f.g[ia] += c * b;
    f.g[ib] += c * a;
    f.h[ia][ib] += c * Matrix3::identity();
    f.h[ib][ia] += c * Matrix3::identity();
}

fn form(layout: &Layout, s: &Snapshot, coord: &Coord, refs: &[f64], with_vel: bool) -> QForm {
    let ev = |d: &QDef| eval_quantity(layout, s, d, with_vel);
    match coord {
        Coord::Dot(a, b) => {
            let (qa, qb) = (ev(a), ev(b));
            let mut f = QForm::new(&[qa, qb], qa.x.dot(&qb.x));
            add_dot(&mut f, 1.0, 0, 1);
            f
        }
        Coord::Combo([(c1, a1, b1), (c2, a2, b2)]) => {
            let q = [ev(a1), ev(b1), ev(a2), ev(b2)];
            let val = c1 * q[0].x.dot(&q[1].x) + c2 * q[2].x.dot(&q[3].x);
            let mut f = QForm::new(&q, val);
            add_dot(&mut f, *c1, 0, 1);
            add_dot(&mut f, *c2, 2, 3);
            f
        }
        Coord::HalfSq(d) => {
            let qd = ev(d);
            let mut f = QForm::new(&[qd], 0.5 * qd.x.norm_squared());
            f.g[0] = qd.x;
            f.h[0][0] = Matrix3::identity();
            f
        }
        Coord::Norm(d) => {
            let qd = ev(d);
            let l = qd.x.norm().max(1e-300);
            let u = qd.x / l;
            let mut f = QForm::new(&[qd], l);
            f.g[0] = u;
            f.h[0][0] = (Matrix3::identity() - u * u.transpose()) / l;
            f
        }
        Coord::Angle { x1, y1, x2, slot } => {
            let q = [ev(x1), ev(y1), ev(x2)];
            let (s_, c_) = (q[1].x.dot(&q[2].x), q[0].x.dot(&q[2].x));
            let r2 = (s_ * s_ + c_ * c_).max(1e-300);
            let val = unwrap_near(s_.atan2(c_), refs[*slot]);
            let mut f = QForm::new(&q, val);
            // θ(s, c): θ_s = c/r², θ_c = −s/r², θ_ss = −2cs/r⁴, θ_cc = 2cs/r⁴, θ_sc = (s²−c²)/r⁴.
            let (ts, tc) = (c_ / r2, -s_ / r2);
            let r4 = r2 * r2;
            let (tss, tcc, tsc) = (
                -2.0 * c_ * s_ / r4,
                2.0 * c_ * s_ / r4,
                (s_ * s_ - c_ * c_) / r4,
            );
            // ∇s: (0, x2, y1); ∇c: (x2, 0, x1), over quantities (x1, y1, x2).
            let gs = [Vector3::zeros(), q[2].x, q[1].x];
            let gc = [q[2].x, Vector3::zeros(), q[0].x];
            for m in 0..3 {
                f.g[m] = ts * gs[m] + tc * gc[m];
                for n in 0..3 {
                    f.h[m][n] = tss * gs[m] * gs[n].transpose()
                        + tcc * gc[m] * gc[n].transpose()
                        + tsc * (gs[m] * gc[n].transpose() + gc[m] * gs[n].transpose());
                }
            }
            // Second derivatives of s and c themselves: H_s(y1,x2) = I, H_c(x1,x2) = I.
            let i3 = Matrix3::identity();
            f.h[1][2] += ts * i3;
            f.h[2][1] += ts * i3;
            f.h[0][2] += tc * i3;
            f.h[2][0] += tc * i3;
            f
        }
    }
}

/// Evaluate a scalar coordinate. `v` is needed for `rate`/`conv` (pass zeros otherwise);
/// `refs` are the angle branch references. The coordinate-space Hessian is written into
/// `hess` when given (kept out of the returned value: it is large, and most callers need only
/// the gradient).
// Quantity indices address several parallel arrays (values, Jacobians, gradient and Hessian
// blocks); index loops read better than zipped iterators here.
#[allow(clippy::needless_range_loop)]
pub fn eval_coord(
    layout: &Layout,
    s: &Snapshot,
    coord: &Coord,
    refs: &[f64],
    v: Option<&[f64]>,
    hess: Option<&mut LMat>,
) -> CoordVal {
    let f = form(layout, s, coord, refs, v.is_some());
    // Local blocks, deduplicated.
    let mut blocks = [(0usize, 0usize); 4];
    let mut nb = 0;
    for q in &f.qs[..f.n] {
        for p in q.parts.iter().flatten() {
            let (col, len) = match p {
                Part::R { col, .. } => (*col, 3),
                Part::P { col, .. } => (*col, 4),
            };
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
    // Local Jacobians of the quantities.
    let mut jac = [SMatrix::<f64, 3, LOCAL>::zeros(); 4];
    for (m, q) in f.qs[..f.n].iter().enumerate() {
        for p in q.parts.iter().flatten() {
            match p {
                Part::R { col, sign } => {
                    let l = local_start(*col);
                    for k in 0..3 {
                        jac[m][(k, l + k)] += sign;
                    }
                }
                Part::P { col, sign, b, .. } => {
                    let l = local_start(*col);
                    let mut view = jac[m].fixed_view_mut::<3, 4>(0, l);
                    view += *sign * b;
                }
            }
        }
    }
    let mut grad = LVec::zeros();
    let mut grad_t = LVec::zeros();
    let (mut xi_t, mut rate, mut conv) = (0.0, 0.0, 0.0);
    for m in 0..f.n {
        grad += jac[m].transpose() * f.g[m];
        xi_t += f.g[m].dot(&f.qs[m].x_t);
        rate += f.g[m].dot(&f.qs[m].xd);
        conv += f.g[m].dot(&f.qs[m].conv);
        for n in 0..f.n {
            let hmn = &f.h[m][n];
            if hmn.iter().all(|x| *x == 0.0) {
                continue;
            }
            conv += f.qs[m].xd.dot(&(hmn * f.qs[n].xd));
            if f.qs[m].x_t != Vector3::zeros() {
                grad_t += jac[n].transpose() * (hmn.transpose() * f.qs[m].x_t);
            }
        }
    }
    if let Some(hess) = hess {
        hess.fill(0.0);
        for m in 0..f.n {
            for n in 0..f.n {
                let hmn = &f.h[m][n];
                if hmn.iter().all(|x| *x == 0.0) {
                    continue;
                }
                *hess += jac[m].transpose() * hmn * jac[n];
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

/// The raw (unbranched) value of an angle coordinate, for updating its branch reference.
pub fn raw_angle(layout: &Layout, s: &Snapshot, coord: &Coord) -> Option<f64> {
    if let Coord::Angle { x1, y1, x2, .. } = coord {
        let q = [x1, y1, x2].map(|d| eval_quantity(layout, s, d, false));
        Some(q[1].x.dot(&q[2].x).atan2(q[0].x.dot(&q[2].x)))
    } else {
        None
    }
}
