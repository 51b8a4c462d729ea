//! `M`, `Ψ` and the accelerations: the composite-rigid-body mass matrix, the Newton–Euler
//! forces with the force elements, the saddle-point solve `[M Gᵀ; G 0]` (a tree without rows:
//! the small-tree kernel below five planar coordinates, the articulated-body algorithm from
//! five on, else `L D Lᵀ` of `M`), the GGL residual's pieces and the forces the drivers exert.

use super::kinematics::{Kin, Sv};
use super::tree::{NodeCoord, Parent};
use super::{body_wrench, JRow, JointModel, Rates, ABA_MIN_DOFS};
use super::{crba, planar, rnea};
use crate::mbs::kin::{eval_coord_wrenches_accel, BodyAccel};
use crate::mbs::system::System;
use crate::mbs::ModelError;
use nalgebra::{DMatrix, DVector};

impl JointModel {
    pub fn mass_matrix(&mut self, sys: &System, t: f64, q: &[f64], m: &mut DMatrix<f64>) {
        // A slice fill: nalgebra's element iterator cost 15 instructions per entry.
        m.as_mut_slice().fill(0.0);
        self.mass_matrix_entries(sys, t, q, m);
    }

    /// [`JointModel::mass_matrix`] into a matrix whose entries off the coordinates' root paths
    /// are already zero (not zeroed again).
    pub(super) fn mass_matrix_entries(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        m: &mut DMatrix<f64>,
    ) {
        if !self.load_tree_as(sys, t, q, Rates::None, true) {
            self.inertias(sys);
        }
        self.mass_matrix_loaded(sys, q, m);
    }

    /// Whether the tree is planar (`ws.fast.plane`), with the planar projections of the
    /// loaded recursion and inertias made (false also with the fast paths off). After
    /// [`JointModel::load_tree`] and [`JointModel::inertias`].
    fn planar_loaded(&mut self, sys: &System, with_motion: bool) -> bool {
        if self.ws.general_only {
            return false;
        }
        if !(self.ws.fast.built && self.ws.fast.plane_checked) {
            self.check_plane(sys);
        }
        let ws = &mut self.ws;
        let Some(plane) = &ws.fast.plane else {
            return false;
        };
        // The pose's projections once per pose (the mass matrix and the forces of one
        // residual share them), the rates' after every new motion.
        let key = (ws.pose_gen, ws.inertia_gen);
        if ws.planar.key != Some(key) {
            ws.planar.project_pose(plane, &ws.kin.s, &ws.ib, &ws.ic);
            ws.planar.key = Some(key);
        }
        if with_motion && ws.planar.motion_key != Some(ws.generation) {
            ws.planar.project_motion(plane, &ws.kin.vel, &ws.kin.acc);
            ws.planar.motion_key = Some(ws.generation);
        }
        true
    }

    /// The mass matrix's entries from the loaded poses and inertias (any rates).
    fn mass_matrix_loaded(&mut self, sys: &System, q: &[f64], m: &mut DMatrix<f64>) {
        if self.planar_loaded(sys, false) {
            planar::entries(&self.ws.planar, Some(m), None);
            return; // no Euler parameters in a planar tree
        }
        crba::mass_matrix_entries(&self.nodes, &self.ws.kin.s, &self.ws.ic, m);
        for k in 0..self.euler.len() {
            let (a, c) = (self.euler[k].1, self.euler[k].2);
            let (e, _) = self.euler_of(k, q, None);
            m.view_mut((a, a), (4, 4)).ger(c, &e, &e, 1.0);
        }
    }

    pub fn forces(&mut self, sys: &System, t: f64, q: &[f64], v: &[f64], f: &mut [f64]) {
        let fast = !self.ws.general_only;
        self.forces_with(sys, t, q, v, f, fast);
    }

    /// `Ψ`; with `fast`, the elements on tree joint coordinates enter `Ψ` directly instead of
    /// as wrenches, and a planar tree runs the planar recursion (`ws.w` then lacks those
    /// elements and `ws.f`, the subtree sums, is not filled: the position Jacobian's tangents
    /// and the driver forces want both, and call this without).
    pub(super) fn forces_with(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        f: &mut [f64],
        fast: bool,
    ) {
        let planar_first = self.load_tree_as(sys, t, q, Rates::Full(v), fast);
        if !planar_first {
            self.inertias(sys);
        }
        self.forces_loaded(sys, t, f, fast, planar_first);
    }

    /// [`JointModel::forces_with`] from the recursion loaded with the state's rates and the
    /// inertias; `planar_first` when that load was the planar-first one, which made the
    /// transmitted forces. The element layer's snapshot is filled only when an element reads
    /// it (and then left filled for the callers that linearize the elements, `fast` off).
    fn forces_loaded(
        &mut self,
        sys: &System,
        t: f64,
        f: &mut [f64],
        fast: bool,
        planar_first: bool,
    ) {
        if planar_first {
            // Every element enters `Ψ` directly (`planar_first_ok`).
            planar::entries(&self.ws.planar, None, Some(f));
            self.add_direct_terms(sys, t, f);
            return;
        }
        self.ensure_fast(sys);
        let all_fast = fast && self.ws.fast.all_terms;
        let extra = !sys.tires.is_empty() || !sys.contact_friction.is_empty();
        if !all_fast || extra {
            self.fill_snapshot(sys, true);
        }
        let planar = fast && self.planar_loaded(sys, true);
        // Applied wrenches: none when every element enters `Ψ` directly and the planar
        // recursion runs (the spatial one reads `ws.w` anyway).
        let wrenches = !all_fast || extra || !planar;
        if wrenches {
            self.ws.w.iter_mut().for_each(|w| *w = Sv::zeros());
        }
        for (k, term) in sys.terms.iter().enumerate() {
            if fast && self.ws.fast.terms[k].is_some() {
                continue; // `add_direct_terms`
            }
            let cw = self.wrenches(sys, &term.coord, true);
            // With its preload from equilibrium, if the element has `static_preload`.
            let (force, _, _) = sys.term_law(k, cw.val, cw.rate, t);
            if force == 0.0 {
                continue;
            }
            for bw in &cw.bodies[..cw.n] {
                self.ws.w[self.body_node[bw.body]] += force * body_wrench(bw);
            }
        }
        self.add_tire_wrenches(sys, t);
        self.add_contact_friction_wrenches(sys, t);
        let ws = &mut self.ws;
        if let (true, Some(plane)) = (planar, &ws.fast.plane) {
            let w = wrenches.then_some(&ws.w[..]);
            planar::bias_forces(plane, &self.nodes, &mut ws.planar, &sys.gravity, w, f);
        } else {
            rnea::bias_forces(
                &self.nodes,
                &ws.kin.s,
                &ws.kin.vel,
                &ws.kin.acc,
                &sys.gravity,
                &ws.ib,
                &ws.w,
                &mut ws.f,
                f,
            );
        }
        if fast {
            self.add_direct_terms(sys, t, f);
        }
    }

    /// The force elements on tree joint coordinates (`ws.fast.terms`), straight into `Ψ` from
    /// the loaded `x`, `ẋ` (a driven joint's pair of torques or forces does not act on the
    /// state).
    fn add_direct_terms(&self, sys: &System, t: f64, f: &mut [f64]) {
        let kin = &self.ws.kin;
        direct_terms(&self.ws.fast.terms, sys, t, &kin.x, &kin.xd, f);
    }

    /// `ρ = r − K x` of `[M Gᵀ; G 0] (p̈, λ) = (Ψ, γ)` for a given `x = (p̈, λ)`, without
    /// forming `M` or `G`: `Ψ` as [`JointModel::forces`] gives it, then one pass with `p̈` in
    /// (node accelerations `ΔA_i = ΔA_λ(i) + S_i p̈_i` on top of the bias accelerations):
    /// `M p̈ = Sᵀ Σ_subtree I ΔA` plus the Euler parameters' `c e eᵀ p̈`, `Gᵀλ` as the rows'
    /// wrenches times `λ` summed over the subtrees, and `γ − G p̈ = ü_row − ξ̈` with `ξ̈` at the
    /// full accelerations (`ξ̈(p̈) = ξ̈(0) + G p̈`). The equations of forming `K` (a unit test
    /// compares them); the BDF's re-anchoring evaluates it at its path points.
    #[allow(clippy::too_many_arguments)]
    pub fn saddle_residual(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        x: &[f64],
        out: &mut [f64],
    ) {
        let nq = self.n_q();
        let (pdd, lambda) = x.split_at(nq);
        let (of, og) = out.split_at_mut(nq);
        self.forces(sys, t, q, v, of);
        // The rows read the snapshot with velocities (the recursion is the one `forces` ran;
        // its spatial poses and inertias are made here if a planar-first load left them out).
        self.load(sys, t, q, Rates::Full(v));
        self.inertias(sys);
        let n = self.nodes.len();
        let ws = &mut self.ws;
        ws.res_da.resize(n, Sv::zeros());
        ws.res_w.clear();
        ws.res_w.resize(n, Sv::zeros());
        for (i, node) in self.nodes.iter().enumerate() {
            let mut da = match node.parent {
                Parent::Node(p) => ws.res_da[p],
                _ => Sv::zeros(),
            };
            if let NodeCoord::Free(k) = node.coord {
                for (l, d) in node.dofs().enumerate() {
                    da += ws.kin.s[d] * pdd[k + l];
                }
            }
            ws.res_da[i] = da;
        }
        for (k, &a) in self.active.iter().enumerate() {
            let r = match self.rows[a] {
                JRow::Element(r) => r,
                JRow::Norm(n) => {
                    let (col, (e, ed)) = (self.euler[n].1, self.euler_of(n, q, Some(v)));
                    let e_pdd = (0..4).map(|d| e[d] * pdd[col + d]).sum::<f64>();
                    og[k] = -ed.norm_squared() - e_pdd;
                    for d in 0..4 {
                        of[col + d] -= lambda[k] * e[d];
                    }
                    continue;
                }
            };
            let (c, _, motion) = Self::row_coord(sys, r);
            let ddu = motion.map_or(0.0, |m| sys.motion(m, t)[2]);
            let (kin, da) = (&self.ws.kin, &self.ws.res_da);
            let (cw, xi_dd) =
                eval_coord_wrenches_accel(sys.layout(), &self.ws.snap, c, &self.ws.refs, |b| {
                    let i = self.body_node[b];
                    let (omega_dot, acc) = kin.body_acceleration_of(i, &(kin.acc[i] + da[i]));
                    BodyAccel {
                        omega: kin.body_velocity(i).0,
                        omega_dot,
                        acc,
                    }
                });
            og[k] = -xi_dd + ddu;
            for bw in &cw.bodies[..cw.n] {
                self.ws.res_w[self.body_node[bw.body]] += lambda[k] * body_wrench(bw);
            }
        }
        let ws = &mut self.ws;
        for i in (0..n).rev() {
            let f = ws.ib[i].mul(&ws.res_da[i]) + ws.res_w[i];
            if let NodeCoord::Free(a) = self.nodes[i].coord {
                for (l, d) in self.nodes[i].dofs().enumerate() {
                    of[a + l] -= ws.kin.s[d].dot(&f);
                }
            }
            // `res_w[p]` collects the parent's own wrench and its children's subtree sums.
            if let Parent::Node(p) = self.nodes[i].parent {
                ws.res_w[p] += f;
            }
        }
        for k in 0..self.euler.len() {
            let (a, c) = (self.euler[k].1, self.euler[k].2);
            let (e, _) = self.euler_of(k, q, None);
            let e_pdd = (0..4).map(|d| e[d] * pdd[a + d]).sum::<f64>();
            for d in 0..4 {
                of[a + d] -= c * e[d] * e_pdd;
            }
        }
    }

    /// Body `b`'s rates from the recursion (its accelerations at `p̈ = 0`).
    pub(super) fn body_accel(&self, kin: &Kin, b: usize) -> BodyAccel {
        let i = self.body_node[b];
        let (omega_dot, acc) = kin.body_acceleration(i);
        BodyAccel {
            omega: kin.body_velocity(i).0,
            omega_dot,
            acc,
        }
    }

    /// `[M Gᵀ; G 0] [p̈; λ] = [Ψ; γ]`, dense; [`JointModel::accelerations_into`] into new
    /// vectors.
    pub fn accelerations(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>), ModelError> {
        let (mut a, mut lambda) = (vec![0.0; self.n_q()], vec![0.0; self.n_c()]);
        self.accelerations_into(sys, t, q, v, &mut a, &mut lambda)?;
        Ok((a, lambda))
    }

    /// `[M Gᵀ; G 0] [p̈; λ] = [Ψ; γ]` into `acc` (`n_q`) and `lambda` (`n_c`). A tree (no
    /// loop rows) allocates nothing: one forward pass serves `M` and `Ψ`, and `M p̈ = Ψ` is
    /// solved by `L D Lᵀ` in the workspace (its cost matters for small trees, where the
    /// whole evaluation is a few hundred flops).
    pub fn accelerations_into(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        acc: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), ModelError> {
        let (nq, nc) = (self.n_q(), self.n_c());
        if nq == 0 {
            // Every degree of freedom driven: nothing to solve for (nalgebra refuses views of
            // an empty matrix). Outputs still follow the drivers.
            lambda.fill(0.0);
            return Ok(());
        }
        if nc == 0 && self.unconstrained_accelerations(sys, t, q, v, acc) {
            return Ok(());
        }
        self.accelerations_formed(sys, t, q, v, acc, lambda)
    }

    /// [`JointModel::accelerations_into`] where no recursion of its own serves the tree: `M`
    /// formed and factored (not inlined: the small trees' path stays lean).
    #[inline(never)]
    fn accelerations_formed(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        acc: &mut [f64],
        lambda: &mut [f64],
    ) -> Result<(), ModelError> {
        let (nq, nc) = (self.n_q(), self.n_c());
        if nc == 0 {
            // A spatial tree, a planar one below five coordinates that is not simple (a
            // planar joint, a particle, a driven or moving-frame node), or a singular `M` in
            // `unconstrained_accelerations` (this `L D Lᵀ` refuses it too).
            let planar_first = self.load_tree_as(sys, t, q, Rates::Full(v), true);
            let mut m = std::mem::take(&mut self.ws.m);
            if m.shape() != (nq, nq) {
                m = DMatrix::zeros(nq, nq);
            }
            // The CRBA writes the entries of coordinates on one root path only.
            m.as_mut_slice().fill(0.0);
            if planar_first {
                // `M` and `Ψ` from the one pass of the load (`planar::PlanarRef::load`).
                planar::entries(&self.ws.planar, Some(&mut m), Some(acc));
                self.add_direct_terms(sys, t, acc);
            } else {
                self.inertias(sys);
                self.mass_matrix_loaded(sys, q, &mut m);
                let fast = !self.ws.general_only;
                self.forces_loaded(sys, t, acc, fast, false);
            }
            let ok = crate::dense::ldlt_solve(m.as_mut_slice(), acc);
            self.ws.m = m;
            if ok {
                return Ok(());
            }
            // Not positive definite (a massless chain): the LU below says so.
        }
        let mut m = DMatrix::zeros(nq, nq);
        let mut g = DMatrix::zeros(nc, nq);
        let mut rhs = vec![0.0; nq + nc];
        self.mass_matrix(sys, t, q, &mut m);
        self.constraint_jacobian_and_rhs(sys, t, q, v, &mut g, &mut rhs[nq..]);
        self.forces(sys, t, q, v, &mut rhs[..nq]);
        let mut a = DMatrix::zeros(nq + nc, nq + nc);
        a.view_mut((0, 0), (nq, nq)).copy_from(&m);
        a.view_mut((0, nq), (nq, nc)).copy_from(&g.transpose());
        a.view_mut((nq, 0), (nc, nq)).copy_from(&g);
        let x = a.lu().solve(&DVector::from_vec(rhs)).ok_or_else(|| {
            sys.err(format!(
                "singular joint-coordinate saddle-point matrix at t = {t} (dependent loop \
                 constraints or a massless chain)"
            ))
        })?;
        acc.copy_from_slice(&x.as_slice()[..nq]);
        lambda.copy_from_slice(&x.as_slice()[nq..]);
        Ok(())
    }

    /// `p̈ = M⁻¹ Ψ` of a tree (no loop rows) where the tree is planar (the planar-first load
    /// serves it): with at least [`ABA_MIN_DOFS`] free coordinates by the articulated-body
    /// algorithm, below that, for a simple tree (one revolute or prismatic joint per body,
    /// `planar/small.rs`), by the small-tree kernel; `false`, nothing usable written,
    /// otherwise (or where `M` is singular). What
    /// [`crate::integrate::system::Mechanical::unconstrained_accelerations`] asks of the
    /// joint formulation (the BDF's residual and the other methods' accelerations without
    /// constraints).
    pub fn unconstrained_accelerations(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        acc: &mut [f64],
    ) -> bool {
        if self.n_c() != 0 {
            return false;
        }
        if self.n_q() < ABA_MIN_DOFS {
            return self.small_tree_accelerations(sys, t, q, v, acc);
        }
        self.load_tree_as(sys, t, q, Rates::Full(v), true) && self.planar_articulated(sys, t, acc)
    }

    /// `p̈ = M⁻¹ Ψ` of a small simple planar tree by its one-pass kernel (`planar/small.rs`),
    /// without the shared load: false, nothing usable written, where the tree is not one
    /// (or `M` is singular there).
    fn small_tree_accelerations(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
        acc: &mut [f64],
    ) -> bool {
        if !self.planar_first_ok(sys) {
            return false;
        }
        let ws = &self.ws;
        let (Some(plane), true) = (&ws.fast.plane, ws.planar_ref.is_small()) else {
            return false;
        };
        let terms = &ws.fast.terms;
        let direct = |x: &[f64], xd: &[f64], f: &mut [f64]| direct_terms(terms, sys, t, x, xd, f);
        ws.planar_ref
            .small_accelerations(plane, &sys.gravity, q, v, direct, acc)
    }

    /// Whether [`JointModel::unconstrained_accelerations`] takes the small-tree kernel (known
    /// after a first evaluation has built the planar data; for tests and diagnostics).
    pub fn small_tree_kernel(&self) -> bool {
        let ws = &self.ws;
        self.n_c() == 0
            && self.n_q() < ABA_MIN_DOFS
            && !ws.general_only
            && ws.fast.planar_first
            && ws.planar_ref.is_small()
    }

    /// `p̈ = M⁻¹ Ψ` after a planar-first load: `Ψ` from its one pass and the force elements
    /// ([`JointModel::forces_loaded`]), then the articulated-body algorithm, without forming
    /// `M`. Not inlined: the small trees' path in `accelerations_into` stays as it was.
    #[inline(never)]
    fn planar_articulated(&mut self, sys: &System, t: f64, acc: &mut [f64]) -> bool {
        self.forces_loaded(sys, t, acc, true, true);
        let ws = &mut self.ws;
        ws.planar_ref.solve(&mut ws.planar, acc)
    }

    /// Into `ws.psi` (per dof): the generalized forces `τ = Sᵀ F` the joints need at the
    /// state's accelerations and multipliers (inverse dynamics: the subtree sums of
    /// `I A + V ×* I V` minus the applied and constraint wrenches). Zero on the free dofs (up
    /// to round-off), a driver's force on its driven dof. Models without Euler-parameter
    /// nodes (their normalization force is not a wrench).
    pub(super) fn driven_forces(
        &mut self,
        sys: &System,
        t: f64,
        q: &[f64],
        v: &[f64],
    ) -> Result<(), ModelError> {
        let (pdd, lambda) = self.accelerations(sys, t, q, v)?;
        let mut psi = std::mem::take(&mut self.ws.psi);
        psi.resize(self.n_q().max(self.n_dof), 0.0);
        // Applied wrenches (every element as a wrench), the recursion at (q, v).
        self.forces_with(sys, t, q, v, &mut psi[..self.n_q()], false);
        // Constraint forces −λ ∇ξ as applied wrenches (`M p̈ = Ψ − Gᵀλ`).
        for (k, &a) in self.active.iter().enumerate() {
            let JRow::Element(r) = self.rows[a] else {
                continue;
            };
            let (c, _, _) = Self::row_coord(sys, r);
            let cw = self.wrenches(sys, c, false);
            for bw in &cw.bodies[..cw.n] {
                self.ws.w[self.body_node[bw.body]] -= lambda[k] * body_wrench(bw);
            }
        }
        let nq = self.n_q();
        let ws = &mut self.ws;
        // Accelerations with p̈ in: A_i = A_λ(i) + S_i ẍ_i on top of the bias accelerations.
        ws.acc_full.resize(self.nodes.len(), Sv::zeros());
        for (i, node) in self.nodes.iter().enumerate() {
            let mut a = match node.parent {
                Parent::Node(p) => ws.acc_full[p] - ws.kin.acc[p],
                _ => Sv::zeros(),
            };
            if let NodeCoord::Free(k) = node.coord {
                for (l, d) in node.dofs().enumerate() {
                    a += ws.kin.s[d] * pdd[k + l];
                }
            }
            ws.acc_full[i] = ws.kin.acc[i] + a;
        }
        rnea::bias_forces(
            &self.nodes,
            &ws.kin.s,
            &ws.kin.vel,
            &ws.acc_full,
            &sys.gravity,
            &ws.ib,
            &ws.w,
            &mut ws.f,
            &mut psi[..nq],
        );
        // `ws.f` now holds the subtree sums.
        psi.iter_mut().for_each(|x| *x = 0.0);
        for (i, node) in self.nodes.iter().enumerate() {
            for d in node.dofs() {
                psi[d] = ws.kin.s[d].dot(&ws.f[i]);
            }
        }
        ws.psi = psi;
        Ok(())
    }
}

/// The force elements on tree joint coordinates (`terms`, per force term), straight into `Ψ`
/// (`f`, per state coordinate) from the dof values `x` and rates `xd` (a driven joint's pair
/// of torques or forces does not act on the state).
fn direct_terms(
    terms: &[Option<super::TreeCoord>],
    sys: &System,
    t: f64,
    x: &[f64],
    xd: &[f64],
    f: &mut [f64],
) {
    for (k, tc) in terms.iter().enumerate() {
        let Some(tc) = tc else { continue };
        // The coordinate itself, also for an angle: it is continuous (`Workspace::refs`).
        let force = sys.term_force(k, x[tc.dof], xd[tc.dof], t);
        if let (Some(a), true) = (tc.state, force != 0.0) {
            f[a] += force;
        }
    }
}
