//! Planar trees: `M` and `Ψ` in three numbers per spatial quantity instead of six.
//!
//! When every tree joint moves its body within one plane (revolute axes parallel to a common
//! unit normal `n`, prismatic axes and planar joints' travels perpendicular to it), every
//! motion subspace `S` has the angular part along `n` and the linear part in the plane, and it
//! stays so at every pose the tree can reach (a rotation about `n` keeps `n`, a translation in
//! the plane keeps the plane). Then `M = Sᵀ I S` and `Ψ = −Sᵀ f` read only the in-plane part
//! of each quantity: the moment about `n` and the force in the plane. Those follow from the
//! in-plane parts alone: the mass `m`, the first moment's in-plane part `h`, the rotational
//! inertia `J` about the `n` axis through the origin, the velocities' `ω` along `n` and the
//! in-plane velocity of the point at the origin. Out-of-plane motion of a moving frame, gravity
//! across the plane and products of inertia with `n` load the joints only with reactions, which
//! `M` and `Ψ` do not contain. So the planar recursion gives the same `M` and `Ψ` as
//! [`super::crba`] and [`super::rnea`] (to round-off), with about a quarter of the flops (at one
//! state, where the poses are cached, they were half of the stiff double pendulum's
//! evaluation; docs/benchmarks.md, "One evaluation, session 13").
//!
//! Planar vectors `[ω; x; y]` are the projections of the world-frame spatial vectors of
//! [`super::kinematics`] on `(n; e₁, e₂)`, `e₁ × e₂ = n`.

use super::kinematics::{ang, lin, Inertia, Sv};
use super::tree::{Node, NodeCoord, NodeKind, Parent};
use nalgebra::{DMatrix, Vector3};

mod small;
pub use small::SMALL_MAX;

/// A planar motion or force vector `[ω; x; y]` (moment about `n` for a force). Plain
/// fields: the recursions of a small tree are a few dozen of these operations, which
/// nalgebra's generic loops do not always unroll.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pv {
    pub w: f64,
    pub x: f64,
    pub y: f64,
}

impl Pv {
    #[inline]
    pub const fn new(w: f64, x: f64, y: f64) -> Pv {
        Pv { w, x, y }
    }
    #[inline]
    pub fn dot(&self, o: &Pv) -> f64 {
        self.w * o.w + self.x * o.x + self.y * o.y
    }
}

impl std::ops::Add for Pv {
    type Output = Pv;
    #[inline]
    fn add(self, o: Pv) -> Pv {
        Pv::new(self.w + o.w, self.x + o.x, self.y + o.y)
    }
}

impl std::ops::Sub for Pv {
    type Output = Pv;
    #[inline]
    fn sub(self, o: Pv) -> Pv {
        Pv::new(self.w - o.w, self.x - o.x, self.y - o.y)
    }
}

impl std::ops::AddAssign for Pv {
    #[inline]
    fn add_assign(&mut self, o: Pv) {
        *self = *self + o;
    }
}

impl std::ops::Mul<f64> for Pv {
    type Output = Pv;
    #[inline]
    fn mul(self, a: f64) -> Pv {
        Pv::new(self.w * a, self.x * a, self.y * a)
    }
}

/// Motion cross motion `v ×ₘ m` in the plane (the in-plane part of the spatial `crm`; the
/// angular part `ω × ω'` of two rotations about `n` vanishes).
#[inline]
pub fn crm(v: &Pv, m: &Pv) -> Pv {
    Pv::new(0.0, m.w * v.y - v.w * m.y, v.w * m.x - m.w * v.x)
}

/// `(c, s)` of an angle about `n` applied to in-plane coordinates `[x, y]`.
#[inline]
fn rot2((c, s): (f64, f64), p: [f64; 2]) -> [f64; 2] {
    [c * p[0] - s * p[1], s * p[0] + c * p[1]]
}

/// The plane: its normal and two in-plane axes (world frame).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plane {
    pub n: Vector3<f64>,
    pub e1: Vector3<f64>,
    pub e2: Vector3<f64>,
}

/// A planar spatial inertia at the origin: mass, in-plane first moment `m c`, rotational
/// inertia about the normal through the origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PInertia {
    pub m: f64,
    pub hx: f64,
    pub hy: f64,
    pub j: f64,
}

impl PInertia {
    /// `I v`: `[J ω + hₓ v_y − h_y vₓ; m vₓ − ω h_y; m v_y + ω hₓ]` (the in-plane part of
    /// `Inertia::mul`).
    #[inline]
    pub fn mul(&self, v: &Pv) -> Pv {
        Pv::new(
            self.j * v.w + self.hx * v.y - self.hy * v.x,
            self.m * v.x - v.w * self.hy,
            self.m * v.y + v.w * self.hx,
        )
    }
}

/// Motion cross force `v ×* f` in the plane.
#[inline]
pub fn crf(v: &Pv, f: &Pv) -> Pv {
    Pv::new(v.x * f.y - v.y * f.x, -v.w * f.y, v.w * f.x)
}

impl Plane {
    /// The plane of the tree's motion, if every node moves in one: each node is revolute,
    /// prismatic, fixed, planar or a particle's planar translation, and every subspace `s`
    /// (at the loaded pose) has its angular part along one normal and its linear part, for
    /// a translation, perpendicular to it, to `tol` relative. `None` for anything else (a
    /// spherical, universal or cylindrical joint, free bodies, a tree without a rotation).
    pub fn detect(nodes: &[Node], s: &[Sv], tol: f64) -> Option<Plane> {
        let planar_kind = |k: NodeKind| {
            matches!(
                k,
                NodeKind::Revolute
                    | NodeKind::Prismatic
                    | NodeKind::Fixed
                    | NodeKind::Planar
                    | NodeKind::PlanarTranslation
            )
        };
        if !nodes.iter().all(|n| planar_kind(n.kind)) {
            return None;
        }
        let dofs = || nodes.iter().flat_map(|n| n.dofs());
        let n = dofs()
            .map(|d| ang(&s[d]))
            .find(|a| a.norm() > 0.0)?
            .normalize();
        for d in dofs() {
            let (a, l) = (ang(&s[d]), lin(&s[d]));
            let an = a.norm();
            if an > 0.0 {
                if a.cross(&n).norm() > tol * an {
                    return None;
                }
            } else if l.dot(&n).abs() > tol * l.norm() {
                return None;
            }
        }
        // Any in-plane axis will do: the one from the smallest component of `n`.
        let k = n.iamin();
        let mut u = Vector3::zeros();
        u[k] = 1.0;
        let e1 = (u - n * n[k]).normalize();
        Some(Plane {
            n,
            e1,
            e2: n.cross(&e1),
        })
    }

    /// A motion vector's planar part.
    #[inline]
    pub fn motion(&self, v: &Sv) -> Pv {
        let (a, l) = (ang(v), lin(v));
        Pv::new(a.dot(&self.n), l.dot(&self.e1), l.dot(&self.e2))
    }

    /// A force vector's planar part (the same projection: moment about `n`, in-plane force).
    #[inline]
    pub fn force(&self, f: &Sv) -> Pv {
        self.motion(f)
    }

    /// A point's (or free vector's) in-plane coordinates.
    #[inline]
    pub fn point(&self, p: &Vector3<f64>) -> [f64; 2] {
        [p.dot(&self.e1), p.dot(&self.e2)]
    }

    pub fn inertia(&self, i: &Inertia) -> PInertia {
        PInertia {
            m: i.m,
            hx: i.h.dot(&self.e1),
            hy: i.h.dot(&self.e2),
            j: self.n.dot(&(i.j * self.n)),
        }
    }
}

impl std::ops::AddAssign for PInertia {
    #[inline]
    fn add_assign(&mut self, o: PInertia) {
        self.m += o.m;
        self.hx += o.hx;
        self.hy += o.hy;
        self.j += o.j;
    }
}

/// The planar-first load: a planar tree's `s`, inertias, velocities and bias accelerations
/// straight from the coordinates, without the spatial poses they are otherwise projected
/// from (quaternions, rotation matrices, world-frame inertias `A J Aᵀ`: about two thirds of
/// an evaluation along a trajectory on the stiff double pendulum; docs/benchmarks.md, "One
/// evaluation, session 15").
///
/// Every body of a planar tree turns about `n` only, so its rotation is `Rot_n(φ) A_ref`
/// with `A_ref` its rotation at a reference pose and `φ` the sum of the rotation stages'
/// changes `±(x − x_ref)` on its root path, and the in-plane coordinates of a body-fixed
/// vector are those at the reference turned by `φ`. This holds what does not depend on the
/// pose, taken from one spatial pose ([`PlanarRef::build`]), with the tree's topology
/// flattened into [`PNode`]s and [`PStage`]s (plain arrays); [`PlanarRef::load`]'s pose and
/// motion mirror [`super::kinematics::Kin::positions`] and [`super::kinematics::Kin::motion`]
/// in the plane, and equal their projections to round-off (test
/// `planar_first_load_equals_the_spatial_recursion`).
#[derive(Debug, Clone, Default)]
pub struct PlanarRef {
    /// The bodies' mass data it was built with (`System::bodies_id`).
    pub key: Option<u64>,
    nodes: Vec<PNode>,
    /// The nodes' stages in the order they move the child frame (`PNode::stages`).
    stages: Vec<PStage>,
    /// Per node at the loaded pose.
    at: Vec<PAt>,
    /// Every node one stage (a revolute or prismatic joint), its coordinate free, its parent
    /// a node or ground, no particle: [`PlanarRef::pass_simple`] serves a new pose.
    simple: bool,
}

/// One tree node as the planar recursions read it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PNode {
    pub(super) parent: Parent,
    /// Its stages in [`PlanarRef::stages`], and its dofs.
    stages: std::ops::Range<usize>,
    pub(super) dofs: std::ops::Range<usize>,
    /// The state coordinate of its first dof, if they are free (not driven, not fixed).
    pub(super) state: Option<usize>,
    /// A particle's frame, which never rotates (as in `Kin::positions`).
    particle: bool,
    /// The stages move each other's axes (`NodeKind::stages_interact`).
    interact: bool,
    /// Eliminated by a driver: its dofs carry the driven accelerations.
    driven: bool,
    /// The parent joint frame's origin from the parent's body origin, and the child joint
    /// frame's origin from the body origin, in-plane at the reference.
    pf_off: [f64; 2],
    cf_off: [f64; 2],
    /// Mass and rotational inertia about `n` through the centre (0 without body).
    mass: f64,
    jnn: f64,
}

/// One stage: its dof, whether it rotates, the coordinate at the reference, and the
/// rotation's sign about `n` (in `w`) or the translation's in-plane axis (in `x`, `y`) at
/// the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PStage {
    dof: usize,
    rot: bool,
    x_ref: f64,
    axis: Pv,
}

/// A node at the loaded pose: angle from the reference, its `(cos, sin)`, the body origin
/// (centre of mass) in the plane.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PAt {
    phi: f64,
    cs: (f64, f64),
    com: [f64; 2],
}

impl PAt {
    /// Ground's: no turn, at the origin.
    const ROOT: PAt = PAt {
        phi: 0.0,
        cs: (1.0, 0.0),
        com: [0.0; 2],
    };
}

impl PlanarRef {
    /// From a spatial pose (`s`, `rot` of [`super::kinematics::Kin`] after `positions`, at
    /// the dof values `x`); `body(b)` gives body `b`'s mass and rotational inertia about its
    /// centre in body axes.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &mut self,
        key: u64,
        plane: &Plane,
        nodes: &[Node],
        x: &[f64],
        s: &[Sv],
        rot: &[nalgebra::Matrix3<f64>],
        body: impl Fn(usize) -> (f64, nalgebra::Matrix3<f64>),
    ) {
        self.key = Some(key);
        self.nodes.clear();
        self.stages.clear();
        for (i, node) in nodes.iter().enumerate() {
            let first = self.stages.len();
            for st in node.stages() {
                let d = node.dof + st.k;
                let (a, l) = (ang(&s[d]), lin(&s[d]));
                let axis = if st.rot {
                    Pv::new(a.dot(&plane.n).signum(), 0.0, 0.0)
                } else {
                    Pv::new(0.0, l.dot(&plane.e1), l.dot(&plane.e2))
                };
                self.stages.push(PStage {
                    dof: d,
                    rot: st.rot,
                    x_ref: x[d],
                    axis,
                });
            }
            let pf = match node.parent {
                Parent::Node(k) => rot[k] * node.parent_frame.origin,
                Parent::Ground | Parent::Frame(_) => node.parent_frame.origin,
            };
            let (mass, jnn) = node.body.map_or((0.0, 0.0), |b| {
                let (m, j) = body(b);
                let nb = rot[i].transpose() * plane.n;
                (m, nb.dot(&(j * nb)))
            });
            self.nodes.push(PNode {
                parent: node.parent,
                stages: first..self.stages.len(),
                dofs: node.dofs(),
                state: match node.coord {
                    NodeCoord::Free(a) => Some(a),
                    _ => None,
                },
                particle: node.kind == NodeKind::PlanarTranslation,
                interact: node.kind.stages_interact(),
                driven: matches!(node.coord, NodeCoord::Driven(_)),
                pf_off: plane.point(&pf),
                cf_off: plane.point(&(rot[i] * node.child_frame.origin)),
                mass,
                jnn,
            });
        }
        let at = PAt {
            phi: 0.0,
            cs: (1.0, 0.0),
            com: [0.0; 2],
        };
        self.at = vec![at; nodes.len()];
        self.simple = self.nodes.iter().all(|nd| {
            nd.stages.len() == 1
                && nd.state.is_some()
                && !nd.particle
                && !nd.driven
                && !matches!(nd.parent, Parent::Frame(_))
        });
    }

    /// The planar-first load's recursions over the nodes:
    /// - with `pose`: `ws.s`, `ws.ib`, `ws.ic` at the dof values `x` (moving frames at
    ///   `frames`);
    /// - with `rates = Some(stale)`: `ws.vel`, `ws.acc` from the rates `xd` and the driven
    ///   accelerations `xdd` when the pose is new or they are `stale`, then always `ws.f`,
    ///   the forces the joints transmit (each body's `I (a − g) + v ×* I v`, summed over its
    ///   subtree; every applied force enters `Ψ` directly on this path).
    ///
    /// True when the motion was made. What is not made must be current in `ws` already. All
    /// run in one forward pass, then the subtree sums: along a trajectory every evaluation
    /// needs all three, and separate passes cost more in loop and call overhead than in
    /// arithmetic on a small tree (docs/benchmarks.md, "One evaluation, session 17").
    pub fn load(
        &mut self,
        plane: &Plane,
        at: PlanarAt,
        pose: bool,
        rates: Option<bool>,
        ws: &mut PlanarWs,
    ) -> bool {
        match (pose, rates) {
            (true, None) => self.pass::<true, false, false>(plane, &at, ws),
            (false, None) => return false,
            (true, Some(_)) if self.simple => self.pass_simple(plane, &at, ws),
            (true, Some(_)) => self.pass::<true, true, true>(plane, &at, ws),
            (false, Some(true)) => self.pass::<false, true, true>(plane, &at, ws),
            (false, Some(false)) => {
                self.pass::<false, false, true>(plane, &at, ws);
                return false;
            }
        }
        rates.is_some()
    }

    /// `tau` (per state coordinate) becomes `M⁻¹ tau` at the loaded pose, by the
    /// articulated-body algorithm ([`super::aba`]); false where `M` is singular.
    pub fn solve(&self, ws: &mut PlanarWs, tau: &mut [f64]) -> bool {
        let n = self.nodes.len();
        super::aba::solve(&self.nodes, &ws.s, &ws.ib[..n], &mut ws.aba, tau)
    }

    /// [`PlanarRef::pass`] with pose, motion and forces for a [`PlanarRef::simple`] tree:
    /// the same operations in the same order (the same numbers up to the sign of zeros), without the
    /// stage loop and the cases it cannot meet. Along a trajectory of a small tree this pass
    /// is most of an evaluation (docs/benchmarks.md, "One evaluation, session 24").
    fn pass_simple(&mut self, plane: &Plane, inp: &PlanarAt, ws: &mut PlanarWs) {
        let n = self.nodes.len();
        ws.fit(n, inp.x.len());
        let (x, xd) = (inp.x, inp.xd);
        let ag = Pv::new(
            0.0,
            -inp.gravity.dot(&plane.e1),
            -inp.gravity.dot(&plane.e2),
        );
        let (s, ib, ic, at) = (
            &mut ws.s[..],
            &mut ws.ib[..n],
            &mut ws.ic[..n],
            &mut self.at[..n],
        );
        let (vel, acc, f) = (&mut ws.vel[..n], &mut ws.acc[..n], &mut ws.f[..n]);
        let stages = &self.stages[..n];
        for (i, node) in self.nodes.iter().enumerate() {
            // One stage per node: node `i`'s is stage `i`.
            let st = &stages[i];
            let parent = match node.parent {
                Parent::Node(k) => (at[k], vel[k], acc[k]),
                _ => (PAt::ROOT, Pv::default(), Pv::default()),
            };
            let nd = simple_node(node, st, x[st.dof], xd[st.dof], parent, &ag);
            s[st.dof] = nd.s;
            at[i] = nd.at;
            (ib[i], ic[i]) = (nd.ib, nd.ib);
            (vel[i], acc[i], f[i]) = (nd.vel, nd.acc, nd.f);
        }
        for i in (0..n).rev() {
            if let Parent::Node(p) = self.nodes[i].parent {
                let (c, fi) = (ic[i], f[i]);
                ic[p] += c;
                f[p] += fi;
            }
        }
    }

    fn pass<const POSE: bool, const MOTION: bool, const FORCE: bool>(
        &mut self,
        plane: &Plane,
        inp: &PlanarAt,
        ws: &mut PlanarWs,
    ) {
        let n = self.nodes.len();
        ws.fit(n, inp.x.len());
        let (x, xd, xdd, frames) = (inp.x, inp.xd, inp.xdd, inp.frames);
        let ag = Pv::new(
            0.0,
            -inp.gravity.dot(&plane.e1),
            -inp.gravity.dot(&plane.e2),
        );
        let (s, ib, ic, at) = (
            &mut ws.s[..],
            &mut ws.ib[..n],
            &mut ws.ic[..n],
            &mut self.at[..n],
        );
        let (vel, acc, f) = (&mut ws.vel[..n], &mut ws.acc[..n], &mut ws.f[..n]);
        for (i, node) in self.nodes.iter().enumerate() {
            if POSE {
                let (phi_p, cs_p, base) = match node.parent {
                    Parent::Ground => (0.0, (1.0, 0.0), [0.0; 2]),
                    Parent::Frame(f) => (0.0, (1.0, 0.0), plane.point(&frames[f][0])),
                    Parent::Node(k) => (at[k].phi, at[k].cs, at[k].com),
                };
                let off = rot2(cs_p, node.pf_off);
                let mut o = [base[0] + off[0], base[1] + off[1]];
                // `cs` is current while `turned` is false.
                let (mut phi, mut cs, mut turned) = (phi_p, cs_p, false);
                for st in &self.stages[node.stages.clone()] {
                    let (d, ax) = (st.dof, st.axis);
                    if st.rot {
                        s[d] = Pv::new(ax.w, ax.w * o[1], -ax.w * o[0]);
                        phi += ax.w * (x[d] - st.x_ref);
                        turned = true;
                    } else {
                        if turned {
                            let (sn, c) = phi.sin_cos();
                            (cs, turned) = ((c, sn), false);
                        }
                        let a = rot2(cs, [ax.x, ax.y]);
                        s[d] = Pv::new(0.0, a[0], a[1]);
                        o = [o[0] + x[d] * a[0], o[1] + x[d] * a[1]];
                    }
                }
                if node.particle {
                    (phi, cs, turned) = (0.0, (1.0, 0.0), false);
                }
                if turned {
                    let (sn, c) = phi.sin_cos();
                    cs = (c, sn);
                }
                let coff = rot2(cs, node.cf_off);
                let c = [o[0] - coff[0], o[1] - coff[1]];
                at[i] = PAt { phi, cs, com: c };
                let m = node.mass;
                ib[i] = PInertia {
                    m,
                    hx: m * c[0],
                    hy: m * c[1],
                    j: node.jnn + m * (c[0] * c[0] + c[1] * c[1]),
                };
                ic[i] = ib[i];
            }
            if MOTION {
                let (vp, ap) = match node.parent {
                    Parent::Ground => (Pv::default(), Pv::default()),
                    Parent::Frame(f) => {
                        let ([vx, vy], [ax, ay]) =
                            (plane.point(&frames[f][1]), plane.point(&frames[f][2]));
                        (Pv::new(0.0, vx, vy), Pv::new(0.0, ax, ay))
                    }
                    Parent::Node(k) => (vel[k], acc[k]),
                };
                // The stages in order: a planar joint's later axes move with its earlier
                // coordinates (`Kin::node_bias`).
                let (mut sxd, mut bias) = (Pv::default(), Pv::default());
                for st in &self.stages[node.stages.clone()] {
                    let sm = s[st.dof] * xd[st.dof];
                    if node.interact {
                        bias += crm(&sxd, &sm);
                    }
                    sxd += sm;
                }
                let v = vp + sxd;
                let mut a = ap + crm(&v, &sxd) + bias;
                if node.driven {
                    for d in node.dofs.clone() {
                        a += s[d] * xdd[d];
                    }
                }
                vel[i] = v;
                acc[i] = a;
            }
            if FORCE {
                f[i] = body_force(&ib[i], &vel[i], &acc[i], &ag);
            }
        }
        let parents = || self.nodes.iter().map(|nd| nd.parent);
        if POSE {
            super::crba::sum_subtrees(parents(), ic);
        }
        if FORCE {
            super::crba::sum_subtrees(parents(), f);
        }
    }
}

/// A node of a [`PlanarRef::simple`] tree made from its parent's pose, velocity and bias
/// acceleration (`PAt::ROOT` and zeros under ground): the node's pose, subspace, body
/// inertia, velocity, bias acceleration and body force `I (a + a_g) + v ×* I v`. The one
/// place of this arithmetic for [`PlanarRef::pass_simple`] and the small-tree kernel
/// (`small.rs`), so both give the same numbers.
#[inline(always)]
fn simple_node(
    node: &PNode,
    st: &PStage,
    x: f64,
    xd: f64,
    (pat, vp, ap): (PAt, Pv, Pv),
    ag: &Pv,
) -> SimpleNode {
    let off = rot2(pat.cs, node.pf_off);
    let mut o = [pat.com[0] + off[0], pat.com[1] + off[1]];
    let ax = st.axis;
    let (phi, cs, sd) = if st.rot {
        let phi = pat.phi + ax.w * (x - st.x_ref);
        let (sn, c) = phi.sin_cos();
        (phi, (c, sn), Pv::new(ax.w, ax.w * o[1], -ax.w * o[0]))
    } else {
        let a = rot2(pat.cs, [ax.x, ax.y]);
        o = [o[0] + x * a[0], o[1] + x * a[1]];
        (pat.phi, pat.cs, Pv::new(0.0, a[0], a[1]))
    };
    let coff = rot2(cs, node.cf_off);
    let c = [o[0] - coff[0], o[1] - coff[1]];
    let m = node.mass;
    let ib = PInertia {
        m,
        hx: m * c[0],
        hy: m * c[1],
        j: node.jnn + m * (c[0] * c[0] + c[1] * c[1]),
    };
    let sxd = sd * xd;
    let vel = vp + sxd;
    let acc = ap + crm(&vel, &sxd);
    SimpleNode {
        at: PAt { phi, cs, com: c },
        s: sd,
        ib,
        vel,
        acc,
        f: body_force(&ib, &vel, &acc, ag),
    }
}

/// What [`simple_node`] makes.
#[derive(Clone, Copy)]
struct SimpleNode {
    at: PAt,
    s: Pv,
    ib: PInertia,
    vel: Pv,
    acc: Pv,
    f: Pv,
}

/// What the planar-first load reads: dof values, rates, driven accelerations, the moving
/// frames' positions, velocities and accelerations, and gravity.
#[derive(Clone, Copy)]
pub struct PlanarAt<'a> {
    pub x: &'a [f64],
    pub xd: &'a [f64],
    pub xdd: &'a [f64],
    pub frames: &'a [[Vector3<f64>; 3]],
    pub gravity: &'a Vector3<f64>,
}

/// A body's `I (a + a_g) + v ×* I v` (`a_g` the planar gravity acceleration, reversed).
#[inline(always)]
fn body_force(ib: &PInertia, vel: &Pv, acc: &Pv, ag: &Pv) -> Pv {
    ib.mul(&(*acc + *ag)) + crf(vel, &ib.mul(vel))
}

/// The planar recursion's workspace: the projections of the loaded recursion (`s` per dof,
/// the rest per node), valid for the key they were made at.
#[derive(Debug, Clone, Default)]
pub struct PlanarWs {
    /// `(pose, inertia)` generations of the pose projections (`s`, `ib`, `ic`).
    pub key: Option<(u64, u64)>,
    /// The recursion's generation of the motion projections (`vel`, `acc`).
    pub motion_key: Option<u64>,
    /// Per free dof: `(node, dof, state coordinate, range of targets)`; per target of the
    /// mass matrix the row dof and the entry and its mirror as indices into the column-major
    /// `n_q × n_q` matrix (`layout`).
    cols: Vec<(usize, usize, usize, std::ops::Range<usize>)>,
    targets: Vec<(usize, usize, usize)>,
    n_q: usize,
    pub s: Vec<Pv>,
    pub ib: Vec<PInertia>,
    pub ic: Vec<PInertia>,
    pub vel: Vec<Pv>,
    pub acc: Vec<Pv>,
    pub f: Vec<Pv>,
    /// The articulated-body solve's storage ([`PlanarRef::solve`]).
    aba: super::aba::AbaWs,
}

impl PlanarWs {
    /// Sizes the per-node and per-dof arrays (once; their values are written before read).
    #[inline]
    fn fit(&mut self, n: usize, n_dof: usize) {
        if self.ib.len() != n || self.s.len() != n_dof || self.vel.len() != n {
            self.s.resize(n_dof, Pv::default());
            for v in [&mut self.vel, &mut self.acc, &mut self.f] {
                v.resize(n, Pv::default());
            }
            for v in [&mut self.ib, &mut self.ic] {
                v.resize(n, PInertia::default());
            }
        }
    }

    /// The CRBA's pattern (`cols`, `targets`): each free dof against its own node's and its
    /// ancestors' free dofs.
    pub fn layout(&mut self, nodes: &[Node], n_q: usize) {
        self.cols.clear();
        self.targets.clear();
        self.n_q = n_q;
        for (i, node) in nodes.iter().enumerate() {
            let NodeCoord::Free(a) = node.coord else {
                continue;
            };
            for (k, dk) in node.dofs().enumerate() {
                let lo = self.targets.len();
                let mut j = Parent::Node(i);
                while let Parent::Node(jn) = j {
                    if let NodeCoord::Free(b) = nodes[jn].coord {
                        for (l, dl) in nodes[jn].dofs().enumerate() {
                            let (r, c) = (a + k, b + l);
                            self.targets.push((dl, r + c * n_q, c + r * n_q));
                        }
                    }
                    j = nodes[jn].parent;
                }
                self.cols.push((i, dk, a + k, lo..self.targets.len()));
            }
        }
    }

    /// Projects the subspaces and the body and composite inertias (per pose).
    pub fn project_pose(&mut self, plane: &Plane, s: &[Sv], ib: &[Inertia], ic: &[Inertia]) {
        self.s.clear();
        self.s.extend(s.iter().map(|x| plane.motion(x)));
        // The projection is linear: the composites' projections are the projections' sums.
        self.ib.clear();
        self.ib.extend(ib.iter().map(|i| plane.inertia(i)));
        self.ic.clear();
        self.ic.extend(ic.iter().map(|i| plane.inertia(i)));
        self.f.resize(ib.len(), Pv::default());
    }

    /// Projects the velocities and bias accelerations (per pose and rates).
    pub fn project_motion(&mut self, plane: &Plane, vel: &[Sv], acc: &[Sv]) {
        self.vel.clear();
        self.vel.extend(vel.iter().map(|v| plane.motion(v)));
        self.acc.clear();
        self.acc.extend(acc.iter().map(|a| plane.motion(a)));
    }
}

/// [`super::crba::mass_matrix_entries`] in the plane into `m`, and `Ψ = −Sᵀ f` from the
/// transmitted forces `ws.f` into `psi`, each if given, in one pass over the free dofs:
/// writes the entries of coordinates on one root path (the pattern of
/// [`PlanarWs::layout`], for this `m`'s size).
pub fn entries(ws: &PlanarWs, m: Option<&mut DMatrix<f64>>, psi: Option<&mut [f64]>) {
    let mut m = m.map(|m| {
        assert_eq!(
            m.shape(),
            (ws.n_q, ws.n_q),
            "planar mass matrix of another size"
        );
        m.as_mut_slice()
    });
    let mut psi = psi;
    for (i, dk, a, range) in &ws.cols {
        let s = ws.s[*dk];
        if let Some(m) = m.as_deref_mut() {
            let f = ws.ic[*i].mul(&s);
            for &(dl, ix, iy) in &ws.targets[range.clone()] {
                let v = ws.s[dl].dot(&f);
                m[ix] = v;
                m[iy] = v;
            }
        }
        if let Some(psi) = psi.as_deref_mut() {
            psi[*a] = -s.dot(&ws.f[*i]);
        }
    }
}

/// [`super::rnea::bias_forces`] in the plane from the projected recursion (the planar-first
/// load makes `ws.f` itself): `psi` from gravity `g` and the applied wrenches `w_ext`
/// (world frame, at the origin; projected here), if any.
pub fn bias_forces(
    plane: &Plane,
    nodes: &[Node],
    ws: &mut PlanarWs,
    gravity: &Vector3<f64>,
    w_ext: Option<&[Sv]>,
    psi: &mut [f64],
) {
    let ag = Pv::new(0.0, -gravity.dot(&plane.e1), -gravity.dot(&plane.e2));
    let n = nodes.len();
    let (ib, vel, acc, f) = (&ws.ib[..n], &ws.vel[..n], &ws.acc[..n], &mut ws.f[..n]);
    for i in 0..n {
        f[i] = body_force(&ib[i], &vel[i], &acc[i], &ag);
    }
    if let Some(w) = w_ext {
        for (fi, wi) in f.iter_mut().zip(w) {
            *fi = *fi - plane.force(wi);
        }
    }
    super::crba::sum_subtrees(nodes.iter().map(|nd| nd.parent), f);
    entries(ws, None, Some(psi));
}

#[cfg(test)]
mod tests {
    use super::super::kinematics::{crf as crf6, sv};
    use super::*;
    use nalgebra::Matrix3;

    /// The planar operations are the projections of the spatial ones for in-plane motions,
    /// with any out-of-plane parts in the inertia and the forces (which they must ignore).
    #[test]
    fn planar_operations_are_projections_of_the_spatial_ones() {
        let n = Vector3::new(0.3, -0.5, 0.8).normalize();
        let e1 = Vector3::new(1.0, 0.0, 0.0);
        let e1 = (e1 - n * n.dot(&e1)).normalize();
        let plane = Plane {
            n,
            e1,
            e2: n.cross(&e1),
        };
        let in_plane = |w: f64, x: f64, y: f64| sv(&(w * n), &(x * plane.e1 + y * plane.e2));
        let (v, m) = (in_plane(1.3, -0.7, 2.1), in_plane(-0.4, 0.9, 0.25));
        // A general force and inertia: out-of-plane parts present.
        let f = Sv::new(0.3, -1.1, 0.7, 2.0, 0.4, -0.9);
        let jc = Matrix3::new(2.0, 0.3, -0.2, 0.3, 1.5, 0.1, -0.2, 0.1, 1.1);
        let inertia = Inertia::of_body(3.5, &Vector3::new(0.4, -1.2, 0.6), &jc);
        let pi = plane.inertia(&inertia);
        let norm = |a: Pv| a.dot(&a).sqrt();
        let close = |a: Pv, b: Pv| norm(a - b) <= 1e-13 * (1.0 + norm(b));
        assert!(close(
            pi.mul(&plane.motion(&v)),
            plane.force(&inertia.mul(&v))
        ));
        assert!(close(
            crf(&plane.motion(&v), &plane.force(&f)),
            plane.force(&crf6(&v, &f))
        ));
        // The dot product of a motion and a force: only in-plane parts meet.
        let s = plane.motion(&m);
        assert!((s.dot(&plane.force(&f)) - m.dot(&f)).abs() < 1e-13);
    }
}
