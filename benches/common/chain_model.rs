//! The text of `models/pendulum_chain.toml` for N particles (shared by `benches/bdf_table2.rs`
//! and `tests/bdf.rs`, which checks it against the file for N = 16).

#![allow(dead_code)]

use std::fmt::Write as _;

/// `models/pendulum_chain.toml` for `n` particles in absolute coordinates (written out: the
/// file itself takes the default, joint); `sine`: the suspension as built-in motions (paper
/// 003's excitation), else fed by the inputs `susp_x`, `susp_y` as in the file.
pub fn chain_model_text(n: usize, sine: bool) -> String {
    let mut s = String::new();
    writeln!(
        s,
        "[model]\nname = \"pendulum_chain\"\nformulation = \"absolute\"\n\
         description = \"Chain of {n} pendulums (1 kg, 1 m rods) hanging from a moving suspension point (paper 003)\"\n\
         gravity = [0.0, -9.81, 0.0]\n\n\
         [experiment]\nstart = 0.0\nstop = 200.0\ntolerance = 1e-4\nstep = 0.1\n\n\
         [solver]\nintegrator = \"bdf\"\njacobian = \"dense\"\nrtol = 1e-4\natol = 1e-6\n"
    )
    .unwrap();
    if sine {
        writeln!(
            s,
            "[[frames]]\nname = \"suspension\"\n\
             position = [{{ type = \"sine\", offset = 2.0, amplitude = 0.3, frequency = 0.05 }}, \
             {{ type = \"sine\", amplitude = 0.2, frequency = 0.05 }}, 0.0]\n"
        )
        .unwrap();
    } else {
        writeln!(
            s,
            "[[inputs]]\nname = \"susp_x\"\nunit = \"m\"\nstart = 2.0\n\
             description = \"x position of the suspension point (paper: 2.0 + 0.3 sin(2 pi 0.05 t))\"\n\n\
             [[inputs]]\nname = \"susp_y\"\nunit = \"m\"\nstart = 0.0\n\
             description = \"y position of the suspension point (paper: 0.2 sin(2 pi 0.05 t))\"\n\n\
             [[frames]]\nname = \"suspension\"\n\
             position = [{{ input = \"susp_x\" }}, {{ input = \"susp_y\" }}, 0.0]\n\
             description = \"The suspension point, moved by the inputs\"\n"
        )
        .unwrap();
    }
    for k in 1..=n {
        writeln!(
            s,
            "[[bodies]]\nname = \"p{k}\"\ntype = \"particle\"\nmass = 1.0\nposition = [2.0, -{k}.0, 0.0]\n"
        )
        .unwrap();
    }
    for k in 1..=n {
        let body1 = if k == 1 {
            "suspension".to_string()
        } else {
            format!("p{}", k - 1)
        };
        writeln!(
            s,
            "[[joints]]\nname = \"rod{k}\"\ntype = \"distance\"\nbody1 = \"{body1}\"\nbody2 = \"p{k}\"\n\
             point1 = [2.0, -{}.0, 0.0]\npoint2 = [2.0, -{k}.0, 0.0]\nlength = 1.0\n",
            k - 1
        )
        .unwrap();
    }
    for k in 1..=n {
        writeln!(
            s,
            "[[joints]]\nname = \"plane{k}\"\ntype = \"planar\"\nbody1 = \"ground\"\nbody2 = \"p{k}\"\n\
             point = [2.0, -{k}.0, 0.0]\naxis = [0.0, 0.0, 1.0]\n"
        )
        .unwrap();
    }
    for c in ["x", "y"] {
        writeln!(
            s,
            "[[outputs]]\nname = \"tip_{c}\"\ntype = \"position\"\nbody = \"p{n}\"\ncomponent = \"{c}\"\n\
             description = \"{c} position of the last particle\"\n"
        )
        .unwrap();
    }
    s
}

/// Paper 003's chain of N revolute pendulums in joint coordinates (`formulation = "joint"`):
/// N rigid bobs of 1 kg (inertia 1e-12 kg m², i.e. mathematical pendulums) on 1 m rods, hinged
/// about z, n_q = N, no constraints (n_y = 2N), from the "projected" start of the absolute
/// table (every bob moving with (0, ẏ_susp(0)), the first rod turning with −ẋ_susp(0)/l).
///
/// `Sine`: hung from the translating suspension frame x = 2 + 0.3 sin ωt, y = 0.2 sin ωt
/// (ω = 2π·0.05 rad/s); the equations see it only through ü (effective gravity).
/// `Inputs`: the same frame fed by the inputs `susp_x`, `susp_y` (as models/pendulum_chain.toml),
/// the bobs given at rest (the assembly projects as for the file).
/// `Tilt`: as `Sine`, but hung from a rocker on the suspension whose driven revolute about the
/// global x axis tilts the chain's plane by u(t) = 0.5 sin ωt: gravity's component in the plane
/// is g cos u, so u enters Ψ through gravity's direction (the driven joint is eliminated) and
/// the chain cannot follow it (a tilt about the hinge axis would be followed: the angles would
/// move with u and cancel the term's prediction, as in absolute coordinates).
pub fn joint_chain_model_text(n: usize, suspension: Suspension) -> String {
    let tilt = suspension == Suspension::Tilt;
    let w = 2.0 * std::f64::consts::PI * 0.05;
    let mut s = String::new();
    writeln!(
        s,
        "[model]\nname = \"pendulum_chain_joint\"\nformulation = \"joint\"\n\
         gravity = [0.0, -9.81, 0.0]\n\n\
         [solver]\nintegrator = \"bdf\"\njacobian = \"dense\"\nrtol = 1e-4\natol = 1e-6\n"
    )
    .unwrap();
    let top = if tilt {
        writeln!(
            s,
            "[[frames]]\nname = \"suspension\"\n\
             position = [{{ type = \"sine\", offset = 2.0, amplitude = 0.3, frequency = 0.05 }}, \
             {{ type = \"sine\", amplitude = 0.2, frequency = 0.05 }}, 0.0]\n\n\
             [[bodies]]\nname = \"rocker\"\nmass = 1.0\ninertia = [0.1, 0.1, 0.1]\nposition = [2.0, 0.0, 0.0]\n\n\
             [[joints]]\nname = \"tilt\"\ntype = \"revolute\"\nbody1 = \"suspension\"\nbody2 = \"rocker\"\n\
             point = [2.0, 0.0, 0.0]\naxis = [1.0, 0.0, 0.0]\n\n\
             [[drivers]]\nname = \"tilt_drive\"\njoint = \"tilt\"\n\
             motion = {{ type = \"sine\", amplitude = 0.5, frequency = 0.05 }}\n"
        )
        .unwrap();
        "rocker"
    } else if suspension == Suspension::Inputs {
        writeln!(
            s,
            "[[inputs]]\nname = \"susp_x\"\nunit = \"m\"\nstart = 2.0\n\n\
             [[inputs]]\nname = \"susp_y\"\nunit = \"m\"\nstart = 0.0\n\n\
             [[frames]]\nname = \"suspension\"\n\
             position = [{{ input = \"susp_x\" }}, {{ input = \"susp_y\" }}, 0.0]\n"
        )
        .unwrap();
        "suspension"
    } else {
        writeln!(
            s,
            "[[frames]]\nname = \"suspension\"\n\
             position = [{{ type = \"sine\", offset = 2.0, amplitude = 0.3, frequency = 0.05 }}, \
             {{ type = \"sine\", amplitude = 0.2, frequency = 0.05 }}, 0.0]\n"
        )
        .unwrap();
        "suspension"
    };
    for k in 1..=n {
        let (vy, wz) = if suspension == Suspension::Inputs {
            (0.0, 0.0)
        } else {
            (0.2 * w, if k == 1 { -0.3 * w } else { 0.0 })
        };
        writeln!(
            s,
            "[[bodies]]\nname = \"p{k}\"\nmass = 1.0\ninertia = [1e-12, 1e-12, 1e-12]\n\
             position = [2.0, -{k}.0, 0.0]\nvelocity = [0.0, {vy:e}, 0.0]\n\
             angular_velocity = [0.0, 0.0, {wz:e}]\n"
        )
        .unwrap();
    }
    for k in 1..=n {
        let body1 = if k == 1 {
            top.to_string()
        } else {
            format!("p{}", k - 1)
        };
        writeln!(
            s,
            "[[joints]]\nname = \"hinge{k}\"\ntype = \"revolute\"\nbody1 = \"{body1}\"\nbody2 = \"p{k}\"\n\
             point = [2.0, -{}.0, 0.0]\naxis = [0.0, 0.0, 1.0]\n",
            k - 1
        )
        .unwrap();
    }
    for c in ["x", "y"] {
        writeln!(
            s,
            "[[outputs]]\nname = \"tip_{c}\"\ntype = \"position\"\nbody = \"p{n}\"\ncomponent = \"{c}\"\n"
        )
        .unwrap();
    }
    s
}

/// The suspension of [`joint_chain_model_text`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Suspension {
    Sine,
    Inputs,
    Tilt,
}
