//! Analytic position derivatives: `∂Ψ/∂p` (with `∂Ψ/∂ṗ` in `rnea.rs`), `∂(M a)/∂p` and
//! `∂(Gᵀλ)/∂p`, all as one tangent of the forward recursion and of the Newton–Euler pass along
//! one joint coordinate, fed with different sources.
//!
//! Along `q_j` (joint `j`, motion subspace `S_j`), everything in `j`'s subtree moves with the
//! spatial velocity `S_j`: `δS_i = S_j ×ₘ S_i` (below `j`), `δI_i = S_j ×* I_i − I_i S_j ×ₘ`,
//! `δV_i = δV_λ(i) + δS_i ẋ_i`, `δA_i = δA_λ(i) + δS_i ẍ_i + δV_i ×ₘ S_i ẋ_i + V_i ×ₘ δS_i ẋ_i`,
//! `δf_i = δI_i A_i + I_i δA_i + δV_i ×* I_i V_i + V_i ×* (δI_i V_i + I_i δV_i) − δW_i`,
//! and `∂τ_k/∂q_j = δS_kᵀ F_k + S_kᵀ δF_k` with `F` the subtree sums of the pass being
//! differentiated. Applied wrenches `W` (force elements for `Ψ`, constraint forces `λ` for
//! `Gᵀλ`) change in two ways: the absolute generalized forces change (the element layer's
//! analytic `∂f/∂q_abs · δq_abs + ∂f/∂v_abs · δv_abs`), and a fixed absolute force acts through
//! moved bodies (`[½E(δe) f_e + δr × f_r; 0]`).
//!
//! A spherical node's subspace also depends on its own Euler parameters (`δS` of its own
//! dofs from `kinematics::euler_subspace_derivative`), and so does its acceleration term
//! `−(2 eᵀė/|e|²) S ė` (`Kin::node_bias`). A multi-coordinate node's later stages move with
//! its earlier ones (`δS_l = S_m ×ₘ S_l` for stage `l` after `m`), and its velocity product
//! `Σ_{k<l} (S_k ẋ_k) ×ₘ (S_l ẋ_l)` changes with every `δS` (`Kin::staged_bias_tangent`).
//! Free bodies' translation nodes are massless.

use super::super::kin::{eval_coord, Coord, CoordVal, LMat, LVec, LOCAL};
use super::super::math::e_mat;
use super::super::system::System;
use super::kinematics::{crf, crm, euler, euler_subspace_derivative, sv, Sv};
use super::tree::{NodeCoord, NodeKind, Parent};
use super::{body_wrench, rnea, JointModel, Rates};
use nalgebra::{DMatrix, DVector, Vector3, Vector4};

/// One scalar-coordinate force linearized in absolute coordinates.
pub(super) struct TermLin {
    pub(super) cols: [(usize, usize); LOCAL],
    pub(super) n: usize,
    pub(super) dq: LMat,
    pub(super) dv: LMat,
}

/// Scalar-coordinate forces linearized, their absolute generalized forces per body, and their
/// wrenches per node.
pub(super) struct Applied {
    pub(super) lins: Vec<TermLin>,
    pub(super) fr: Vec<Vector3<f64>>,
    pub(super) fe: Vec<Vector4<f64>>,
    pub(super) w: Vec<Sv>,
}

/// The differentiated pass's inertial data (absent for `Gᵀλ`).
struct Inertial<'a> {
    vel: &'a [Sv],
    /// `A_i`, the root's gravity acceleration included where it applies.
    acc: &'a [Sv],
    /// Per dof.
    xd: &'a [f64],
    xdd: &'a [f64],
}

use super::kinematics::{ang, lin};

impl JointModel {
    /// Linearize the forces `F(ξ, ξ̇) ∇ξ` of `coords` at the loaded state; `law` gives
    /// `(F, F_ξ, F_ξ̇)` of item `k`.
    fn linearize(
        &self,
        sys: &System,
        coords: &[&Coord],
        with_vel: bool,
        law: impl Fn(usize, &CoordVal) -> (f64, f64, f64),
    ) -> Applied {
        let layout = sys.layout();
        let nb = layout.offsets.len();
        let snap = &self.ws.snap;
        let mut va = vec![0.0; layout.n_q];
        for b in 0..nb {
            let o = layout.offsets[b];
            va[o..o + 3].copy_from_slice(snap.rd[b].as_slice());
            if layout.is_rigid(b) {
                va[o + 3..o + 7].copy_from_slice(snap.pd[b].as_slice());
            }
        }
        let mut out = Applied {
            lins: Vec::new(),
            fr: vec![Vector3::zeros(); nb],
            fe: vec![Vector4::zeros(); nb],
            w: vec![Sv::zeros(); self.nodes.len()],
        };
        let mut hess = LMat::zeros();
        let v: Option<&[f64]> = if with_vel { Some(&[]) } else { None };
        for (k, coord) in coords.iter().enumerate() {
            let cv = eval_coord(layout, snap, coord, &self.ws.refs, v, Some(&mut hess));
            let (force, f_xi, f_rate) = law(k, &cv);
            if force == 0.0 && f_xi == 0.0 && f_rate == 0.0 {
                continue;
            }
            let vl = cv.gather(&va);
            let drate = hess * vl + cv.grad_t;
            let dq = cv.grad * (f_xi * cv.grad + f_rate * drate).transpose() + force * hess;
            let dv = f_rate * cv.grad * cv.grad.transpose();
            let (cols, nc) = cv.column_array();
            for &(l, g) in &cols[..nc] {
                let b = self.col_body[g];
                let i = self.body_node[b];
                let c = g - layout.offsets[b];
                let x = force * cv.grad[l];
                if c < 3 {
                    out.fr[b][c] += x;
                    let mut f = Vector3::zeros();
                    f[c] = x;
                    out.w[i] += sv(&self.ws.kin.com[i].cross(&f), &f);
                } else {
                    out.fe[b][c - 3] += x;
                    let mut f = Vector4::zeros();
                    f[c - 3] = x;
                    out.w[i] += sv(&(0.5 * e_mat(&self.ws.kin.e[i]) * f), &Vector3::zeros());
                }
            }
            out.lins.push(TermLin {
                cols,
                n: nc,
                dq,
                dv,
            });
        }
        out
    }

    /// `out[(k, j)] = sign · ∂τ_k/∂q_j` of the pass with inertial data `inertial`, applied
    /// wrenches `applied` and subtree sums `big_f` (of `f_i = I A + V ×* I V − W`).
    fn tangent(
        &self,
        sys: &System,
        inertial: Option<Inertial>,
        applied: &Applied,
        big_f: &[Sv],
        sign: f64,
        out: &mut DMatrix<f64>,
    ) {
        let layout = sys.layout();
        let nb = layout.offsets.len();
        let nn = self.nodes.len();
        let kin = &self.ws.kin;
        let s = &kin.s;
        let mut sub = vec![false; nn];
        let mut ds = vec![Sv::zeros(); self.n_dof];
        let (mut dvel, mut dacc, mut df, mut dw) = (
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
        );
        // `S ẋ` per node (for the inertial pass).
        let sxd: Vec<Sv> = match &inertial {
            Some(inr) => self.nodes.iter().map(|n| kin.s_times(n, inr.xd)).collect(),
            None => Vec::new(),
        };
        // Per body: δr, δe, δṙ, δė along the current column.
        let (mut dr, mut de) = (vec![Vector3::zeros(); nb], vec![Vector4::zeros(); nb]);
        let (mut drd, mut ded) = (vec![Vector3::zeros(); nb], vec![Vector4::zeros(); nb]);
        out.fill(0.0);
        let columns = self.nodes.iter().enumerate().flat_map(|(jn, n)| {
            let c0 = match n.coord {
                NodeCoord::Free(c0) => Some(c0),
                _ => None,
            };
            c0.into_iter()
                .flat_map(move |c0| n.dofs().enumerate().map(move |(m, d)| (jn, m, d, c0 + m)))
        });
        for (jn, m, dm, col) in columns {
            let sj = s[dm];
            let (wj, vj) = (ang(&sj), lin(&sj));
            for i in 0..nn {
                let node = &self.nodes[i];
                let parent = match node.parent {
                    Parent::Node(p) if sub[p] => Some(p),
                    _ => None,
                };
                sub[i] = i == jn || parent.is_some();
                if !sub[i] {
                    node.dofs().for_each(|d| ds[d] = Sv::zeros());
                    dvel[i] = Sv::zeros();
                    dacc[i] = Sv::zeros();
                    if let Some(b) = node.body {
                        dr[b] = Vector3::zeros();
                        de[b] = Vector4::zeros();
                        drd[b] = Vector3::zeros();
                        ded[b] = Vector4::zeros();
                    }
                    continue;
                }
                let spherical = node.kind == NodeKind::Spherical;
                for (k, d) in node.dofs().enumerate() {
                    ds[d] = if i != jn {
                        crm(&sj, &s[d])
                    } else if spherical {
                        let e = euler(&kin.x, node.dof);
                        euler_subspace_derivative(&kin.pf_axes[i], &kin.pf_origin[i], &e, m, k)
                    } else {
                        Sv::zeros()
                    };
                }
                if i == jn && !spherical {
                    // A stage's axis moves with the stages before it: `∂S_l/∂x_m = S_m ×ₘ
                    // S_l` for the stages after `m`'s, zero for it and those before.
                    let mut after = false;
                    for st in node.stages() {
                        let d = node.dof + st.k;
                        if after {
                            ds[d] = crm(&sj, &s[d]);
                        }
                        after |= st.k == m;
                    }
                }
                let (r, e) = (kin.com[i], kin.e[i]);
                if let Some(b) = node.body {
                    dr[b] = vj + wj.cross(&r);
                    de[b] = 0.5 * e_mat(&e).transpose() * wj;
                }
                if let Some(inr) = &inertial {
                    let (dvp, dap) =
                        parent.map_or((Sv::zeros(), Sv::zeros()), |p| (dvel[p], dacc[p]));
                    let ds_xd = node.dofs().fold(Sv::zeros(), |a, d| a + ds[d] * inr.xd[d]);
                    let ds_xdd = node.dofs().fold(Sv::zeros(), |a, d| a + ds[d] * inr.xdd[d]);
                    dvel[i] = dvp + ds_xd;
                    dacc[i] = dap + ds_xdd + crm(&dvel[i], &sxd[i]) + crm(&inr.vel[i], &ds_xd);
                    if spherical {
                        // δ(−c S ė), c = 2 eᵀė/|e|²: the subspace's change, and (own
                        // parameters) c's.
                        let (ev, ed) = (euler(&kin.x, node.dof), euler(inr.xd, node.dof));
                        let n2 = ev.norm_squared();
                        let c = 2.0 * ev.dot(&ed) / n2;
                        dacc[i] -= c * ds_xd;
                        if i == jn {
                            let dc = 2.0 * ed[m] / n2 - 4.0 * ev.dot(&ed) * ev[m] / (n2 * n2);
                            dacc[i] -= dc * sxd[i];
                        }
                    }
                    dacc[i] += kin.staged_bias_tangent(node, inr.xd, |d| ds[d] * inr.xd[d]);
                    if let Some(b) = node.body {
                        let w = ang(&inr.vel[i]);
                        let dwb = ang(&dvel[i]);
                        drd[b] = lin(&dvel[i]) + dwb.cross(&r) + w.cross(&dr[b]);
                        ded[b] =
                            0.5 * (e_mat(&de[b]).transpose() * w + e_mat(&e).transpose() * dwb);
                    }
                }
            }
            // Applied wrench changes.
            dw.iter_mut().for_each(|x| *x = Sv::zeros());
            for (i, node) in self.nodes.iter().enumerate() {
                if let (true, Some(b)) = (sub[i], node.body) {
                    dw[i] += sv(
                        &(0.5 * e_mat(&de[b]) * applied.fe[b] + dr[b].cross(&applied.fr[b])),
                        &Vector3::zeros(),
                    );
                }
            }
            for tl in &applied.lins {
                let (mut jl, mut dvl) = (LVec::zeros(), LVec::zeros());
                for &(l, g) in &tl.cols[..tl.n] {
                    let b = self.col_body[g];
                    let c = g - layout.offsets[b];
                    if c < 3 {
                        jl[l] = dr[b][c];
                        dvl[l] = drd[b][c];
                    } else {
                        jl[l] = de[b][c - 3];
                        dvl[l] = ded[b][c - 3];
                    }
                }
                if jl.iter().all(|x| *x == 0.0) && dvl.iter().all(|x| *x == 0.0) {
                    continue;
                }
                let dfl = tl.dq * jl + tl.dv * dvl;
                for &(l, g) in &tl.cols[..tl.n] {
                    let b = self.col_body[g];
                    let i = self.body_node[b];
                    let c = g - layout.offsets[b];
                    if c < 3 {
                        let mut f = Vector3::zeros();
                        f[c] = dfl[l];
                        dw[i] += sv(&kin.com[i].cross(&f), &f);
                    } else {
                        let mut f = Vector4::zeros();
                        f[c - 3] = dfl[l];
                        dw[i] += sv(&(0.5 * e_mat(&kin.e[i]) * f), &Vector3::zeros());
                    }
                }
            }
            for i in 0..nn {
                df[i] = -dw[i];
                if !sub[i] {
                    continue;
                }
                if let Some(inr) = &inertial {
                    let ii = &self.ws.i6[i];
                    let di = |x: &Sv| crf(&sj, &(ii * x)) - ii * crm(&sj, x);
                    let v = inr.vel[i];
                    df[i] += di(&inr.acc[i])
                        + ii * dacc[i]
                        + crf(&dvel[i], &(ii * v))
                        + crf(&v, &(di(&v) + ii * dvel[i]));
                }
            }
            for i in (0..nn).rev() {
                if let NodeCoord::Free(k0) = self.nodes[i].coord {
                    for (k, d) in self.nodes[i].dofs().enumerate() {
                        out[(k0 + k, col)] = sign * (ds[d].dot(&big_f[i]) + s[d].dot(&df[i]));
                    }
                }
                if let Parent::Node(p) = self.nodes[i].parent {
                    let fi = df[i];
                    df[p] += fi;
                }
            }
        }
    }

    /// `out = ∂Ψ/∂p` at `(t, q, v)`.
    fn position_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        let mut psi = vec![0.0; self.n_q()];
        // Fills the recursion, the inertias and the subtree sums F (applied wrenches in).
        self.forces_with(sys, t, q, v, &mut psi, false);
        self.inertia_matrices();
        let coords: Vec<&Coord> = sys.terms.iter().map(|tm| &tm.coord).collect();
        let mut applied = self.linearize(sys, &coords, true, |k, cv| {
            sys.term_law(k, cv.val, cv.rate, t)
        });
        self.linearize_tires(sys, t, &mut applied);
        self.linearize_contact_friction(sys, t, &mut applied);
        let ag = sv(&Vector3::zeros(), &(-sys.gravity));
        let kin = &self.ws.kin;
        let acc: Vec<Sv> = kin.acc.iter().map(|a| a + ag).collect();
        let inertial = Inertial {
            vel: &kin.vel,
            acc: &acc,
            xd: &kin.xd,
            xdd: &kin.xdd,
        };
        self.tangent(sys, Some(inertial), &applied, &self.ws.f, -1.0, out);
    }

    /// `out = ∂(M a)/∂p` at `q` (`M a` is the Newton–Euler pass with zero rates, no gravity
    /// and the state accelerations `a`).
    fn mass_times_accel_position_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        a: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.load(sys, t, q, Rates::None);
        self.inertias(sys);
        self.inertia_matrices();
        let nn = self.nodes.len();
        let (zv, zx) = (vec![Sv::zeros(); nn], vec![0.0; self.n_dof]);
        let mut xdd = vec![0.0; self.n_dof];
        let mut acc = vec![Sv::zeros(); nn];
        let mut big_f = vec![Sv::zeros(); nn];
        for (i, node) in self.nodes.iter().enumerate() {
            if let NodeCoord::Free(k) = node.coord {
                for (l, d) in node.dofs().enumerate() {
                    xdd[d] = a[k + l];
                }
            }
            let ap = match node.parent {
                Parent::Node(p) => acc[p],
                _ => Sv::zeros(),
            };
            acc[i] = ap + self.ws.kin.s_times(node, &xdd);
            big_f[i] = self.ws.i6[i] * acc[i];
        }
        for i in (0..nn).rev() {
            if let Parent::Node(p) = self.nodes[i].parent {
                let fi = big_f[i];
                big_f[p] += fi;
            }
        }
        let none = Applied {
            lins: Vec::new(),
            fr: vec![Vector3::zeros(); sys.layout().offsets.len()],
            fe: vec![Vector4::zeros(); sys.layout().offsets.len()],
            w: Vec::new(),
        };
        let inertial = Inertial {
            vel: &zv,
            acc: &acc,
            xd: &zx,
            xdd: &xdd,
        };
        self.tangent(sys, Some(inertial), &none, &big_f, 1.0, out);
        // The Euler blocks' `c e eᵀ a`: `c ((eᵀa) I + e aᵀ)`.
        for k in 0..self.euler.len() {
            let (col, c) = (self.euler[k].1, self.euler[k].2);
            let (e, _) = self.euler_of(k, q, None);
            let ab = euler(a, col);
            let mut blk = out.view_mut((col, col), (4, 4));
            blk.ger(c, &e, &ab, 1.0);
            for d in 0..4 {
                blk[(d, d)] += c * e.dot(&ab);
            }
        }
    }

    /// `out = ∂(Gᵀλ)/∂p` at `q`: the constraint forces as applied forces `λ_r ∇ξ_r`.
    fn constraint_force_position_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.load(sys, t, q, Rates::None);
        // Element rows (with their multipliers); the normalizations' `λ e` at the end.
        let (mut coords, mut lam): (Vec<&Coord>, Vec<f64>) = (Vec::new(), Vec::new());
        let mut norms = Vec::new();
        for (k, &a) in self.active.iter().enumerate() {
            match self.rows[a] {
                super::JRow::Element(r) => {
                    coords.push(Self::row_coord(sys, r).0);
                    lam.push(lambda[k]);
                }
                super::JRow::Norm(n) => norms.push((self.euler[n].1, lambda[k])),
            }
        }
        let applied = self.linearize(sys, &coords, false, |k, _| (lam[k], 0.0, 0.0));
        // Subtree sums of f_i = −W_i.
        let mut big_f: Vec<Sv> = applied.w.iter().map(|w| -w).collect();
        for i in (0..self.nodes.len()).rev() {
            if let Parent::Node(p) = self.nodes[i].parent {
                let fi = big_f[i];
                big_f[p] += fi;
            }
        }
        self.tangent(sys, None, &applied, &big_f, -1.0, out);
        for (col, l) in norms {
            for d in 0..4 {
                out[(col + d, col + d)] += l;
            }
        }
    }
}

/// The Jacobians the implicit methods ask for.
impl JointModel {
    /// `∂Ψ/∂ṗ` analytic: the tree's tangent recursion ([`rnea::bias_velocity_jacobian`]) plus,
    /// per force element, `F_ξ̇ g gᵀ` with `g = ∂ξ̇/∂ṗ = Jᵀ∇ξ` (the element's rate depends on
    /// `ṗ` linearly, its direction not at all). `∂Ψ/∂p` analytic too (`derivatives.rs`).
    pub fn force_jacobians(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        df_dq: &mut DMatrix<f64>,
        df_dv: &mut DMatrix<f64>,
    ) {
        self.velocity_jacobian(sys, t, q, v, df_dv);
        self.position_jacobian(sys, t, q, v, df_dq);
    }

    fn velocity_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.load(sys, t, q, Rates::Full(v));
        self.inertias(sys);
        self.inertia_matrices();
        let n = self.n_q();
        let nn = self.nodes.len();
        let (mut dv, mut da, mut df) = (
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
            vec![Sv::zeros(); nn],
        );
        let ws = &self.ws;
        rnea::bias_velocity_jacobian(&self.nodes, &ws.kin, &ws.i6, &mut dv, &mut da, &mut df, out);
        let mut g = DVector::zeros(n);
        for term in &sys.terms {
            let cw = self.wrenches(sys, &term.coord, true);
            let (_, _, f_rate) = sys.law(&term.law, cw.val, cw.rate, t);
            if f_rate == 0.0 {
                continue;
            }
            g.fill(0.0);
            for bw in &cw.bodies[..cw.n] {
                let w = body_wrench(bw);
                let mut node = Parent::Node(self.body_node[bw.body]);
                while let Parent::Node(i) = node {
                    if let NodeCoord::Free(a) = self.nodes[i].coord {
                        for (l, d) in self.nodes[i].dofs().enumerate() {
                            g[a + l] += self.ws.kin.s[d].dot(&w);
                        }
                    }
                    node = self.nodes[i].parent;
                }
            }
            out.ger(f_rate, &g, &g, 1.0);
        }
        self.add_tire_velocity_jacobian(sys, t, out);
        self.add_contact_friction_velocity_jacobian(sys, t, out);
    }

    pub fn constraint_force_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        lambda: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.constraint_force_position_jacobian(sys, t, q, lambda, out);
    }

    pub fn mass_times_accel_jacobian(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        a: &[f64],
        out: &mut DMatrix<f64>,
    ) {
        self.mass_times_accel_position_jacobian(sys, t, q, a, out);
    }
}
