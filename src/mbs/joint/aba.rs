//! `p̈ = M⁻¹ τ` for a planar tree by the articulated-body algorithm (Featherstone, *Rigid
//! Body Dynamics Algorithms*, ch. 7), in O(n) instead of forming `M` by the composite-rigid-
//! body method (O(n²) entries) and factoring it (O(n³)).
//!
//! The velocity and gravity terms are already in `τ` (it is `Ψ`, from the planar recursion's
//! transmitted forces, plus the force elements), so the recursion runs as for a tree at rest
//! without gravity: leaves to root, each node's articulated inertia `I^A` (its body's inertia
//! plus its children's, each with its joint's free directions projected out) and bias force
//! `p^A`; then root to leaves, each node's acceleration change `ΔA` (world-frame planar vectors,
//! [`super::planar::Pv`]) and its joint's `p̈ = D⁻¹ (u − Uᵀ ΔA_parent)` with `U = I^A S`,
//! `D = Sᵀ U`, `u = τ − Sᵀ p^A`. The same `M⁻¹ τ` as `L D Lᵀ` of the composite-rigid-body `M`
//! to round-off (test `planar_first_load_equals_the_spatial_recursion` in
//! tests/joint_formulation.rs).
//! A driven joint has no free direction: its subtree moves with its parent.

use super::planar::{PInertia, PNode, Pv};
use super::tree::Parent;

/// A symmetric planar inertia over `[ω; x; y]` (an articulated inertia is one, but not of the
/// rigid body's four-parameter form [`PInertia`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PSym {
    ww: f64,
    wx: f64,
    wy: f64,
    xx: f64,
    xy: f64,
    yy: f64,
}

impl PSym {
    /// A rigid body's `[J −h_y h_x; −h_y m 0; h_x 0 m]` ([`PInertia::mul`]).
    fn of(i: &PInertia) -> PSym {
        PSym {
            ww: i.j,
            wx: -i.hy,
            wy: i.hx,
            xx: i.m,
            xy: 0.0,
            yy: i.m,
        }
    }

    #[inline]
    fn mul(&self, v: &Pv) -> Pv {
        Pv::new(
            self.ww * v.w + self.wx * v.x + self.wy * v.y,
            self.wx * v.w + self.xx * v.x + self.xy * v.y,
            self.wy * v.w + self.xy * v.x + self.yy * v.y,
        )
    }

    /// `self − a bᵀ`, symmetrized (`b` is `a` scaled by `D⁻¹`, so the sum over a joint's
    /// directions is symmetric already).
    #[inline]
    fn sub_outer(&mut self, a: &Pv, b: &Pv) {
        self.ww -= a.w * b.w;
        self.wx -= 0.5 * (a.w * b.x + a.x * b.w);
        self.wy -= 0.5 * (a.w * b.y + a.y * b.w);
        self.xx -= a.x * b.x;
        self.xy -= 0.5 * (a.x * b.y + a.y * b.x);
        self.yy -= a.y * b.y;
    }

    #[inline]
    fn add(&mut self, o: &PSym) {
        self.ww += o.ww;
        self.wx += o.wx;
        self.wy += o.wy;
        self.xx += o.xx;
        self.xy += o.xy;
        self.yy += o.yy;
    }
}

/// What the backward pass leaves a node's joint for the forward pass: `U` per free direction,
/// `D = Sᵀ U` factored (`L D Lᵀ`, column-major `k × k`), `u`.
#[derive(Debug, Clone, Copy, Default)]
struct Joint {
    k: usize,
    u_dir: [Pv; 3],
    d: [f64; 9],
    u: [f64; 3],
}

/// The recursion's per-node storage (sized on first use).
#[derive(Debug, Clone, Default)]
pub struct AbaWs {
    ia: Vec<PSym>,
    pa: Vec<Pv>,
    da: Vec<Pv>,
    joints: Vec<Joint>,
}

/// `tau` (per state coordinate) becomes `M⁻¹ tau`, for the tree of `nodes` at the pose whose
/// subspaces `s` (per dof) and body inertias `ib` (per node) are given. False where a joint's
/// `D` is not positive definite (a massless subtree: `M` is singular), `tau` then unusable.
pub fn solve(nodes: &[PNode], s: &[Pv], ib: &[PInertia], ws: &mut AbaWs, tau: &mut [f64]) -> bool {
    let n = nodes.len();
    if ws.ia.len() != n {
        ws.ia.resize(n, PSym::default());
        ws.pa.resize(n, Pv::default());
        ws.da.resize(n, Pv::default());
        ws.joints.resize(n, Joint::default());
    }
    for ((ia, pa), b) in ws.ia.iter_mut().zip(&mut ws.pa).zip(ib) {
        *ia = PSym::of(b);
        *pa = Pv::default();
    }
    for (i, node) in nodes.iter().enumerate().rev() {
        let (mut ia, mut pa) = (ws.ia[i], ws.pa[i]);
        let jt = &mut ws.joints[i];
        jt.k = 0;
        if let Some(a) = node.state {
            let dofs = node.dofs.clone();
            let k = dofs.len();
            if k > 3 {
                return false; // not a planar joint (`Plane::detect` admits none)
            }
            jt.k = k;
            if k == 1 {
                // One direction (revolute, prismatic): scalars.
                let sd = s[dofs.start];
                let u_dir = ia.mul(&sd);
                let d = sd.dot(&u_dir);
                let r = 1.0 / d;
                if !(d > 0.0 && r > 0.0) {
                    return false;
                }
                let u = tau[a] - sd.dot(&pa);
                ia.sub_outer(&u_dir, &(u_dir * r));
                pa += u_dir * (u * r);
                (jt.u_dir[0], jt.d[0], jt.u[0]) = (u_dir, d, u);
            } else {
                // Two or three (planar joints, particles in the plane): a k × k `D`.
                for (l, dof) in dofs.clone().enumerate() {
                    jt.u_dir[l] = ia.mul(&s[dof]);
                    jt.u[l] = tau[a + l] - s[dof].dot(&pa);
                }
                for (c, dc) in dofs.clone().enumerate() {
                    for r in 0..k {
                        jt.d[r + c * k] = s[dc].dot(&jt.u_dir[r]);
                    }
                }
                if !crate::dense::ldlt_factor(&mut jt.d[..k * k], k) {
                    return false;
                }
                // `I^A −= U D⁻¹ Uᵀ`, `p^A += U D⁻¹ u`: `D⁻¹` applied to `u` and to each
                // component's row of `U`.
                let mut dinv_u = jt.u;
                crate::dense::ldlt_substitute(&jt.d[..k * k], &mut dinv_u[..k]);
                let comp = |l: usize, c: usize| {
                    let p = jt.u_dir[l];
                    [p.w, p.x, p.y][c]
                };
                let mut w = [[0.0; 3]; 3]; // w[c][l] = (D⁻¹ Uᵀ)_(l, c)
                for (c, wc) in w.iter_mut().enumerate() {
                    for (l, x) in wc.iter_mut().enumerate().take(k) {
                        *x = comp(l, c);
                    }
                    crate::dense::ldlt_substitute(&jt.d[..k * k], &mut wc[..k]);
                }
                for l in 0..k {
                    let wl = Pv::new(w[0][l], w[1][l], w[2][l]);
                    ia.sub_outer(&jt.u_dir[l], &wl);
                    pa += jt.u_dir[l] * dinv_u[l];
                }
            }
        }
        if let Parent::Node(p) = node.parent {
            ws.ia[p].add(&ia);
            ws.pa[p] += pa;
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        let mut da = match node.parent {
            Parent::Node(p) => ws.da[p],
            _ => Pv::default(),
        };
        let jt = &ws.joints[i];
        if let (Some(a), k) = (node.state, jt.k) {
            let mut x = [0.0; 3];
            for ((xl, ul), dir) in x.iter_mut().zip(&jt.u).zip(&jt.u_dir).take(k) {
                *xl = ul - dir.dot(&da);
            }
            if k == 1 {
                x[0] /= jt.d[0];
            } else {
                crate::dense::ldlt_substitute(&jt.d[..k * k], &mut x[..k]);
            }
            for (l, dof) in node.dofs.clone().enumerate() {
                tau[a + l] = x[l];
                da += s[dof] * x[l];
            }
        }
        ws.da[i] = da;
    }
    true
}
