//! Independent references for integration tests and benchmarks: closed-form kinematics and
//! inverse dynamics of the slider-crank and four-link mechanisms (virtual work in the driven
//! angle, no absolute coordinates), the quarter-car static equilibrium by hand, and a reader
//! for the reference tables in `tests/data/*.csv` (made by `tools/references/*.py`) with linear
//! and cubic interpolation in time. Nothing here uses the engine or the integrators.
//!
//! The formulas are the same as in the Python scripts (whose docstrings derive them); the
//! self-test `tests/closed_form_selftest.rs` checks them against numerical derivatives, energy
//! balances and the committed tables.

use std::f64::consts::PI;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Gravity used by every benchmark model.
pub const G: f64 = 9.81;

fn cross(u: [f64; 2], v: [f64; 2]) -> f64 {
    u[0] * v[1] - u[1] * v[0]
}

fn dot(u: [f64; 2], v: [f64; 2]) -> f64 {
    u[0] * v[0] + u[1] * v[1]
}

/// `(cos a, sin a)` and its derivative `(-sin a, cos a)`.
fn dir(a: f64) -> ([f64; 2], [f64; 2]) {
    let (s, c) = a.sin_cos();
    ([c, s], [-s, c])
}

/// How a crank or rotor is driven: angle, rate and acceleration at `t`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Motion {
    /// `angle = rate t`.
    Constant { rate: f64 },
    /// Rate rising as `rate (1 - cos(pi t / ramp)) / 2` for `t < ramp`, then constant (angle,
    /// rate and acceleration continuous). Same as `common.driven_angle(.., "smooth", ..)`.
    SmoothStart { rate: f64, ramp: f64 },
}

impl Motion {
    /// `[angle, rate, acceleration]` at `t >= 0`.
    pub fn eval(&self, t: f64) -> [f64; 3] {
        match *self {
            Motion::Constant { rate } => [rate * t, rate, 0.0],
            Motion::SmoothStart { rate, ramp } => {
                if t < ramp {
                    let x = PI * t / ramp;
                    [
                        0.5 * rate * (t - ramp / PI * x.sin()),
                        0.5 * rate * (1.0 - x.cos()),
                        0.5 * rate * PI / ramp * x.sin(),
                    ]
                } else {
                    [0.5 * rate * ramp + rate * (t - ramp), rate, 0.0]
                }
            }
        }
    }
}

/// Slider-crank of issue 2 (model 3, paper 004): crank O-A at the origin, rod A-B, slider
/// B = (x, 0) on the x axis; gravity along -y.
pub mod slider_crank {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Params {
        /// Crank length, mass (centre at mid length), inertia about z at the centre.
        pub crank_len: f64,
        pub crank_mass: f64,
        pub crank_izz: f64,
        /// Rod length, mass (centre at mid length), inertia about z at the centre.
        pub rod_len: f64,
        pub rod_mass: f64,
        pub rod_izz: f64,
        pub slider_mass: f64,
        pub g: f64,
        /// Coulomb coefficient; friction `-mu |N| tanh(x' / v_reg)` on the slider.
        pub mu: f64,
        pub v_reg: f64,
    }

    impl Default for Params {
        /// The model's values: 0.1 / 0.12 / 1e-4, 0.3 / 0.5 / 4e-3, slider 2, no friction.
        fn default() -> Self {
            Params {
                crank_len: 0.1,
                crank_mass: 0.12,
                crank_izz: 1e-4,
                rod_len: 0.3,
                rod_mass: 0.5,
                rod_izz: 4e-3,
                slider_mass: 2.0,
                g: G,
                mu: 0.0,
                v_reg: 1e-3,
            }
        }
    }

    /// Slider position `x` and rod angle `beta` (from A to B, from +x) with derivatives.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Kinematics {
        pub x: f64,
        pub dx: f64,
        pub ddx: f64,
        pub beta: f64,
        pub dbeta: f64,
        pub ddbeta: f64,
    }

    /// Closed-form kinematics for crank angle `th` (from +x), rate `dth`, acceleration `ddth`.
    pub fn kinematics(p: &Params, th: f64, dth: f64, ddth: f64) -> Kinematics {
        let (a, b) = (p.crank_len, p.rod_len);
        let (st, ct) = th.sin_cos();
        let sb = -a * st / b;
        let cb = (1.0 - sb * sb).sqrt();
        let dbeta = -a * ct * dth / (b * cb);
        let ddbeta = (-a * ct * ddth + a * st * dth * dth + b * sb * dbeta * dbeta) / (b * cb);
        Kinematics {
            x: a * ct + b * cb,
            dx: -a * st * dth - b * sb * dbeta,
            ddx: -a * ct * dth * dth - a * st * ddth - b * cb * dbeta * dbeta - b * sb * ddbeta,
            beta: sb.atan2(cb),
            dbeta,
            ddbeta,
        }
    }

    /// Inverse dynamics along a prescribed crank motion.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Dynamics {
        pub kin: Kinematics,
        /// Ground's normal force on the slider (+y).
        pub normal: f64,
        /// Friction force on the slider along +x.
        pub friction: f64,
        /// Torque about +z the driver applies to the crank.
        pub torque: f64,
        /// Pin forces (global x, y): ground on crank at O, crank on rod at A, slider on rod
        /// at B.
        pub ground_on_crank: [f64; 2],
        pub crank_on_rod: [f64; 2],
        pub slider_on_rod: [f64; 2],
    }

    /// Crank torque by virtual work in the crank angle; the slider's normal force (needed for
    /// friction) from the rod's moment balance about A with the slider's force balance.
    pub fn inverse_dynamics(p: &Params, th: f64, dth: f64, ddth: f64) -> Dynamics {
        let k = kinematics(p, th, dth, ddth);
        let (e, ep) = dir(th);
        let a = p.crank_len;
        let pa = [a * e[0], a * e[1]];
        let acc_a = [
            a * (ddth * ep[0] - dth * dth * e[0]),
            a * (ddth * ep[1] - dth * dth * e[1]),
        ];
        let acc_g1 = [0.5 * acc_a[0], 0.5 * acc_a[1]];
        let acc_g2 = [0.5 * (acc_a[0] + k.ddx), 0.5 * acc_a[1]];
        let d = [k.x - pa[0], -pa[1]];
        // m (a_G - g_vec), with g_vec = (0, -g)
        let inert2 = [p.rod_mass * acc_g2[0], p.rod_mass * (acc_g2[1] + p.g)];
        let inert1 = [p.crank_mass * acc_g1[0], p.crank_mass * (acc_g1[1] + p.g)];
        let r = p.rod_izz * k.ddbeta
            + cross([0.5 * d[0], 0.5 * d[1]], inert2)
            + d[0] * p.slider_mass * p.g
            - d[1] * p.slider_mass * k.ddx;
        let s = (k.dx / p.v_reg).tanh();
        // d_x N + d_y mu |N| s = r, piecewise linear in N (d_x > |d_y| mu for mu < 2.8)
        let n_pos = r / (d[0] + d[1] * p.mu * s);
        let normal = if n_pos >= 0.0 {
            n_pos
        } else {
            r / (d[0] - d[1] * p.mu * s)
        };
        let friction = -p.mu * normal.abs() * s;
        let slider_on_rod = [
            friction - p.slider_mass * k.ddx,
            normal - p.slider_mass * p.g,
        ];
        let crank_on_rod = [inert2[0] - slider_on_rod[0], inert2[1] - slider_on_rod[1]];
        let ground_on_crank = [inert1[0] + crank_on_rod[0], inert1[1] + crank_on_rod[1]];
        let dbeta_dth = -a * th.cos() / (p.rod_len * k.beta.cos());
        let dx_dth = -a * th.sin() - p.rod_len * k.beta.sin() * dbeta_dth;
        let j1 = [0.5 * a * ep[0], 0.5 * a * ep[1]];
        let j2 = [0.5 * (a * ep[0] + dx_dth), 0.5 * a * ep[1]];
        let torque = dot(inert1, j1)
            + dot(inert2, j2)
            + p.crank_izz * ddth
            + p.rod_izz * k.ddbeta * dbeta_dth
            + (p.slider_mass * k.ddx - friction) * dx_dth;
        Dynamics {
            kin: k,
            normal,
            friction,
            torque,
            ground_on_crank,
            crank_on_rod,
            slider_on_rod,
        }
    }

    /// Kinetic + gravitational energy (y = 0 datum) at crank angle `th`, rate `dth`.
    pub fn energy(p: &Params, th: f64, dth: f64) -> f64 {
        let k = kinematics(p, th, dth, 0.0);
        let a = p.crank_len;
        let (e, ep) = dir(th);
        let va = [a * dth * ep[0], a * dth * ep[1]];
        let vg2 = [0.5 * (va[0] + k.dx), 0.5 * va[1]];
        0.5 * p.crank_mass * 0.25 * dot(va, va)
            + 0.5 * p.crank_izz * dth * dth
            + 0.5 * p.rod_mass * dot(vg2, vg2)
            + 0.5 * p.rod_izz * k.dbeta * k.dbeta
            + 0.5 * p.slider_mass * k.dx * k.dx
            + p.g * (p.crank_mass + p.rod_mass) * 0.5 * a * e[1]
    }
}

/// Four-link crank-rocker of issue 2 (model 4, paper 004): rotor disk at the origin with rim
/// point P = r e(theta), coupler P-R, rocker pivot-R with R above the x axis at theta = 0.
pub mod four_link {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Params {
        pub rotor_radius: f64,
        pub coupler_len: f64,
        pub rocker_len: f64,
        pub pivot: [f64; 2],
        /// Square bar section side, density, disk thickness.
        pub width: f64,
        pub density: f64,
        pub disk_thickness: f64,
        pub g: f64,
    }

    impl Default for Params {
        fn default() -> Self {
            Params {
                rotor_radius: 2.0,
                coupler_len: 12.2,
                rocker_len: 7.4,
                pivot: [10.0, 0.0],
                width: 0.1,
                density: 1500.0,
                disk_thickness: 0.1,
                g: G,
            }
        }
    }

    impl Params {
        /// (coupler mass, coupler Izz, rocker mass, rocker Izz, disk mass, disk Izz); bars
        /// `m (L^2 + w^2) / 12` about their centres, disk `m r^2 / 2`.
        pub fn inertias(&self) -> [f64; 6] {
            let area = self.width * self.width;
            let mc = self.density * area * self.coupler_len;
            let mr = self.density * area * self.rocker_len;
            let md = self.density * PI * self.rotor_radius.powi(2) * self.disk_thickness;
            let w2 = self.width * self.width;
            [
                mc,
                mc * (self.coupler_len.powi(2) + w2) / 12.0,
                mr,
                mr * (self.rocker_len.powi(2) + w2) / 12.0,
                md,
                0.5 * md * self.rotor_radius.powi(2),
            ]
        }
    }

    /// Coupler angle `beta` (P to R) and rocker angle `psi` (pivot to R), from +x, with
    /// derivatives.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Kinematics {
        pub beta: f64,
        pub dbeta: f64,
        pub ddbeta: f64,
        pub psi: f64,
        pub dpsi: f64,
        pub ddpsi: f64,
    }

    /// `(beta, psi)` for rotor angle `th` by loop closure (law of cosines; the branch with the
    /// rocker end above the x axis at theta = 0, kept for all theta since d = |pivot - P| stays
    /// inside (coupler - rocker, coupler + rocker) for a Grashof crank-rocker).
    pub fn positions(p: &Params, th: f64) -> (f64, f64) {
        let (e, _) = dir(th);
        let pp = [p.rotor_radius * e[0], p.rotor_radius * e[1]];
        let dv = [p.pivot[0] - pp[0], p.pivot[1] - pp[1]];
        let d = dv[0].hypot(dv[1]);
        let (c, b) = (p.coupler_len, p.rocker_len);
        let alpha = ((d * d + c * c - b * b) / (2.0 * d * c)).acos();
        let beta = dv[1].atan2(dv[0]) + alpha;
        let (eb, _) = dir(beta);
        let rr = [pp[0] + c * eb[0], pp[1] + c * eb[1]];
        let psi = (rr[1] - p.pivot[1]).atan2(rr[0] - p.pivot[0]);
        (beta, psi)
    }

    /// Solves `[c e'(beta), -b e'(psi)] [x; y] = rhs` (Cramer).
    fn solve2(p: &Params, beta: f64, psi: f64, rhs: [f64; 2]) -> (f64, f64) {
        let (_, eb) = dir(beta);
        let (_, es) = dir(psi);
        let col1 = [p.coupler_len * eb[0], p.coupler_len * eb[1]];
        let col2 = [-p.rocker_len * es[0], -p.rocker_len * es[1]];
        let det = cross(col1, col2);
        (cross(rhs, col2) / det, cross(col1, rhs) / det)
    }

    pub fn kinematics(p: &Params, th: f64, dth: f64, ddth: f64) -> Kinematics {
        let (r, c, b) = (p.rotor_radius, p.coupler_len, p.rocker_len);
        let (beta, psi) = positions(p, th);
        let (et, ept) = dir(th);
        let (eb, _) = dir(beta);
        let (es, _) = dir(psi);
        let (dbeta, dpsi) = solve2(p, beta, psi, [-r * dth * ept[0], -r * dth * ept[1]]);
        let rhs = [
            -r * ddth * ept[0] + r * dth * dth * et[0] + c * dbeta * dbeta * eb[0]
                - b * dpsi * dpsi * es[0],
            -r * ddth * ept[1] + r * dth * dth * et[1] + c * dbeta * dbeta * eb[1]
                - b * dpsi * dpsi * es[1],
        ];
        let (ddbeta, ddpsi) = solve2(p, beta, psi, rhs);
        Kinematics {
            beta,
            dbeta,
            ddbeta,
            psi,
            dpsi,
            ddpsi,
        }
    }

    /// Torque about +z the driver applies to the rotor, by virtual work in the rotor angle.
    pub fn rotor_torque(p: &Params, th: f64, dth: f64, ddth: f64) -> f64 {
        let [mc, ic, mr, ir, _, id] = p.inertias();
        let (r, b) = (p.rotor_radius, p.rocker_len);
        let k = kinematics(p, th, dth, ddth);
        let (et, ept) = dir(th);
        let (es, eps) = dir(k.psi);
        let (jb, jp) = solve2(p, k.beta, k.psi, [-r * ept[0], -r * ept[1]]);
        let acc_p = [
            r * (ddth * ept[0] - dth * dth * et[0]),
            r * (ddth * ept[1] - dth * dth * et[1]),
        ];
        let acc_r = [
            b * (k.ddpsi * eps[0] - k.dpsi * k.dpsi * es[0]),
            b * (k.ddpsi * eps[1] - k.dpsi * k.dpsi * es[1]),
        ];
        let j_p = [r * ept[0], r * ept[1]];
        let j_r = [b * jp * eps[0], b * jp * eps[1]];
        let inert_c = [
            mc * 0.5 * (acc_p[0] + acc_r[0]),
            mc * (0.5 * (acc_p[1] + acc_r[1]) + p.g),
        ];
        let inert_r = [mr * 0.5 * acc_r[0], mr * (0.5 * acc_r[1] + p.g)];
        id * ddth
            + dot(inert_c, [0.5 * (j_p[0] + j_r[0]), 0.5 * (j_p[1] + j_r[1])])
            + ic * k.ddbeta * jb
            + dot(inert_r, [0.5 * j_r[0], 0.5 * j_r[1]])
            + ir * k.ddpsi * jp
    }

    /// Kinetic + gravitational energy (y = 0 datum).
    pub fn energy(p: &Params, th: f64, dth: f64) -> f64 {
        let [mc, ic, mr, ir, _, id] = p.inertias();
        let (r, b) = (p.rotor_radius, p.rocker_len);
        let k = kinematics(p, th, dth, 0.0);
        let (et, ept) = dir(th);
        let (es, eps) = dir(k.psi);
        let vp = [r * dth * ept[0], r * dth * ept[1]];
        let vr = [b * k.dpsi * eps[0], b * k.dpsi * eps[1]];
        let vc = [0.5 * (vp[0] + vr[0]), 0.5 * (vp[1] + vr[1])];
        let yc = 0.5 * (r * et[1] + p.pivot[1] + b * es[1]);
        let yr = p.pivot[1] + 0.5 * b * es[1];
        0.5 * id * dth * dth
            + 0.5 * mc * dot(vc, vc)
            + 0.5 * ic * k.dbeta * k.dbeta
            + 0.125 * mr * dot(vr, vr)
            + 0.5 * ir * k.dpsi * k.dpsi
            + p.g * (mc * yc + mr * yr)
    }
}

/// Quarter-car stamp rig of issue 2 (model 5): static equilibrium by hand.
pub mod quarter_car {
    use super::G;

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Params {
        pub chassis_mass: f64,
        pub wheel_mass: f64,
        pub stamp_mass: f64,
        pub susp_k: f64,
        pub susp_c: f64,
        pub susp_free_len: f64,
        pub tire_k: f64,
        pub tire_free_len: f64,
        pub g: f64,
    }

    impl Default for Params {
        fn default() -> Self {
            Params {
                chassis_mass: 300.0,
                wheel_mass: 40.0,
                stamp_mass: 10.0,
                susp_k: 20000.0,
                susp_c: 1500.0,
                susp_free_len: 0.5,
                tire_k: 200000.0,
                tire_free_len: 0.3,
                g: G,
            }
        }
    }

    /// Positions of the centres and forces (compression positive) at rest.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Equilibrium {
        pub chassis_z: f64,
        pub wheel_z: f64,
        pub tire_force: f64,
        pub susp_force: f64,
        /// Actuator force on the stamp along +z.
        pub stamp_force: f64,
    }

    /// Static equilibrium with the stamp top at `stamp_z`: the tire carries chassis and wheel,
    /// the suspension the chassis, the actuator everything.
    pub fn equilibrium(p: &Params, stamp_z: f64) -> Equilibrium {
        let tire_force = (p.chassis_mass + p.wheel_mass) * p.g;
        let susp_force = p.chassis_mass * p.g;
        let wheel_z = stamp_z + p.tire_free_len - tire_force / p.tire_k;
        Equilibrium {
            chassis_z: wheel_z + p.susp_free_len - susp_force / p.susp_k,
            wheel_z,
            tire_force,
            susp_force,
            stamp_force: p.stamp_mass * p.g + tire_force,
        }
    }
}

/// Paper 003's pendulum chain in minimal coordinates (absolute rod angles `phi_k` from -y,
/// counter-clockwise), the equations of `tools/references/pendulum_chain.py`: for checking
/// Cartesian implementations state by state.
pub mod pendulum_chain {
    use nalgebra::{DMatrix, DVector};

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Params {
        pub n: usize,
        pub m: f64,
        pub l: f64,
        pub g: f64,
        /// Suspension `(2 + ax sin wt, ay sin wt)`.
        pub ax: f64,
        pub ay: f64,
        pub omega: f64,
    }

    impl Params {
        /// The paper's moving suspension: 0.3 / 0.2 m at 0.05 Hz.
        pub fn paper(n: usize) -> Self {
            Params {
                n,
                m: 1.0,
                l: 1.0,
                g: super::G,
                ax: 0.3,
                ay: 0.2,
                omega: 2.0 * std::f64::consts::PI * 0.05,
            }
        }

        /// Suspension position, velocity, acceleration.
        pub fn suspension(&self, t: f64) -> [[f64; 2]; 3] {
            let (s, c) = (self.omega * t).sin_cos();
            let w = self.omega;
            [
                [2.0 + self.ax * s, self.ay * s],
                [self.ax * w * c, self.ay * w * c],
                [-self.ax * w * w * s, -self.ay * w * w * s],
            ]
        }
    }

    /// `sum_k l^2 C_jk [cos(phi_j - phi_k) phi''_k + sin(phi_j - phi_k) phi'_k^2]
    ///  = -l C_j [g sin phi_j + cos(phi_j) s''_x + sin(phi_j) s''_y]`, `C_jk = m (n - max(j, k))`
    /// (0-based), solved for `phi''`.
    pub fn accelerations(p: &Params, t: f64, phi: &[f64], dphi: &[f64]) -> Vec<f64> {
        let n = p.n;
        let sdd = p.suspension(t)[2];
        let c = |j: usize, k: usize| p.m * (n - j.max(k)) as f64;
        let mass = DMatrix::from_fn(n, n, |j, k| p.l * p.l * c(j, k) * (phi[j] - phi[k]).cos());
        let rhs = DVector::from_fn(n, |j, _| {
            let quad: f64 = (0..n)
                .map(|k| c(j, k) * (phi[j] - phi[k]).sin() * dphi[k] * dphi[k])
                .sum();
            -p.l * c(j, j) * (p.g * phi[j].sin() + phi[j].cos() * sdd[0] + phi[j].sin() * sdd[1])
                - p.l * p.l * quad
        });
        mass.lu()
            .solve(&rhs)
            .expect("chain mass matrix is positive definite")
            .as_slice()
            .to_vec()
    }

    /// Particle positions, velocities, accelerations, each `[x, y]` per particle.
    pub type Cartesian = (Vec<[f64; 2]>, Vec<[f64; 2]>, Vec<[f64; 2]>);

    /// Particle positions, velocities and accelerations `(x, y)` for given angles, rates and
    /// angular accelerations.
    pub fn cartesian(p: &Params, t: f64, phi: &[f64], dphi: &[f64], ddphi: &[f64]) -> Cartesian {
        let s = p.suspension(t);
        let (mut r, mut v, mut a) = (s[0], s[1], s[2]);
        let (mut rs, mut vs, mut as_) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..p.n {
            let (sn, cs) = phi[k].sin_cos();
            let (e, ep) = ([sn, -cs], [cs, sn]);
            for i in 0..2 {
                r[i] += p.l * e[i];
                v[i] += p.l * dphi[k] * ep[i];
                a[i] += p.l * (ddphi[k] * ep[i] - dphi[k] * dphi[k] * e[i]);
            }
            rs.push(r);
            vs.push(v);
            as_.push(a);
        }
        (rs, vs, as_)
    }
}

/// Absolute rod angles (from -y, counter-clockwise) of a planar chain from its points
/// `[suspension, particle 1, ..., particle N]`, as in `tools/references/pendulum_chain.py`.
pub fn chain_angles(points: &[[f64; 2]]) -> Vec<f64> {
    points
        .windows(2)
        .map(|w| (w[1][0] - w[0][0]).atan2(-(w[1][1] - w[0][1])))
        .collect()
}

#[derive(Debug, Error)]
pub enum RefError {
    #[error("{file}: cannot read: {reason}")]
    Io { file: PathBuf, reason: String },
    #[error("{file}:{line}: {message}")]
    Format {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{file}: no column '{column}' (has {available:?})")]
    NoColumn {
        file: PathBuf,
        column: String,
        available: Vec<String>,
    },
}

/// A reference table: `#` comment lines, a header, rows of numbers; first column `t`,
/// strictly increasing.
#[derive(Debug, Clone)]
pub struct RefTable {
    pub file: PathBuf,
    pub comments: Vec<String>,
    pub columns: Vec<String>,
    /// Column-major: `data[j][i]` is column j at row i.
    pub data: Vec<Vec<f64>>,
}

/// `tests/data/<name>` inside the package.
pub fn data_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(name)
}

impl RefTable {
    /// Loads `tests/data/<name>`.
    pub fn load(name: &str) -> Result<RefTable, RefError> {
        Self::from_file(&data_path(name))
    }

    pub fn from_file(path: &Path) -> Result<RefTable, RefError> {
        let text = std::fs::read_to_string(path).map_err(|e| RefError::Io {
            file: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<RefTable, RefError> {
        let fmt = |line: usize, message: String| RefError::Format {
            file: path.to_path_buf(),
            line,
            message,
        };
        let mut comments = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        let mut data: Vec<Vec<f64>> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(c) = line.strip_prefix('#') {
                comments.push(c.trim().to_string());
            } else if columns.is_empty() {
                columns = line.split(',').map(|s| s.trim().to_string()).collect();
                data = vec![Vec::new(); columns.len()];
            } else {
                let mut n = 0;
                for (j, field) in line.split(',').enumerate() {
                    if j >= columns.len() {
                        return Err(fmt(i + 1, format!("more than {} fields", columns.len())));
                    }
                    let v: f64 = field
                        .trim()
                        .parse()
                        .map_err(|_| fmt(i + 1, format!("'{field}' is not a number")))?;
                    data[j].push(v);
                    n += 1;
                }
                if n != columns.len() {
                    return Err(fmt(
                        i + 1,
                        format!("{n} fields, header has {}", columns.len()),
                    ));
                }
            }
        }
        if columns.first().map(String::as_str) != Some("t") || data[0].len() < 2 {
            return Err(fmt(
                0,
                "needs a header starting with 't' and at least two rows".into(),
            ));
        }
        if data[0].windows(2).any(|w| w[1] <= w[0]) {
            return Err(fmt(0, "times are not strictly increasing".into()));
        }
        Ok(RefTable {
            file: path.to_path_buf(),
            comments,
            columns,
            data,
        })
    }

    pub fn times(&self) -> &[f64] {
        &self.data[0]
    }

    pub fn len(&self) -> usize {
        self.data[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.data[0].is_empty()
    }

    pub fn column_index(&self, name: &str) -> Result<usize, RefError> {
        self.columns
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| RefError::NoColumn {
                file: self.file.clone(),
                column: name.to_string(),
                available: self.columns.clone(),
            })
    }

    pub fn column(&self, name: &str) -> Result<&[f64], RefError> {
        Ok(&self.data[self.column_index(name)?])
    }

    /// Interval index i with `t[i] <= t <= t[i+1]` (clamped to the ends).
    fn interval(&self, t: f64) -> usize {
        let ts = self.times();
        let i = ts.partition_point(|&x| x <= t);
        i.clamp(1, ts.len() - 1) - 1
    }

    /// Linear interpolation of column `col` at `t` (held constant outside the table).
    pub fn linear(&self, col: usize, t: f64) -> f64 {
        let ts = self.times();
        let t = t.clamp(ts[0], ts[ts.len() - 1]);
        let i = self.interval(t);
        let y = &self.data[col];
        let s = (t - ts[i]) / (ts[i + 1] - ts[i]);
        y[i] + s * (y[i + 1] - y[i])
    }

    /// Cubic interpolation of column `col` at `t`: the Lagrange cubic through the four samples
    /// around `t` (shifted inwards at the ends), error O(dt^4) for smooth data.
    pub fn cubic(&self, col: usize, t: f64) -> f64 {
        let ts = self.times();
        let n = ts.len();
        if n < 4 {
            return self.linear(col, t);
        }
        let t = t.clamp(ts[0], ts[n - 1]);
        let i = self.interval(t);
        let j0 = i.saturating_sub(1).min(n - 4);
        let y = &self.data[col];
        let mut sum = 0.0;
        for a in j0..j0 + 4 {
            let mut w = 1.0;
            for b in j0..j0 + 4 {
                if a != b {
                    w *= (t - ts[b]) / (ts[a] - ts[b]);
                }
            }
            sum += w * y[a];
        }
        sum
    }

    /// Cubic interpolation by column name.
    pub fn at(&self, name: &str, t: f64) -> Result<f64, RefError> {
        Ok(self.cubic(self.column_index(name)?, t))
    }

    /// Largest |value - reference| over simulated samples `(times[i], values[i])`, the
    /// reference interpolated cubically; samples outside the table's time range are skipped
    /// (so a run longer than the table is not compared against a held value).
    pub fn max_abs_error(
        &self,
        name: &str,
        times: &[f64],
        values: &[f64],
    ) -> Result<f64, RefError> {
        let col = self.column_index(name)?;
        let ts = self.times();
        let (t0, t1) = (ts[0], ts[ts.len() - 1]);
        Ok(times
            .iter()
            .zip(values)
            .filter(|(t, _)| **t >= t0 && **t <= t1 + 1e-12 * t1.abs().max(1.0))
            .map(|(&t, &v)| (v - self.cubic(col, t)).abs())
            .fold(0.0, f64::max))
    }
}
