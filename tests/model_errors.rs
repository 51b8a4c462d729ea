//! The catalogue of bad model files: each mistake gives an error that names the file, the line
//! and column (marked `§` in the model text), the element and the problem.

use mbsfmu::mbs::{load_model, load_model_str, ModelError};
use std::path::{Path, PathBuf};

const FILE: &str = "bad/model.toml";

/// A valid model the cases below break in one place.
const BASE: &str = r#"[model]
name = "m"
gravity = [0.0, -9.81, 0.0]

[[parameters]]
name = "k"
value = 100.0
unit = "N/m"

[[inputs]]
name = "u"
start = 0.0

[[bodies]]
name = "a"
mass = 1.0
inertia = [1.0, 1.0, 1.0]
position = [1.0, 0.0, 0.0]

[[bodies]]
name = "b"
mass = 1.0
inertia = [1.0, 1.0, 1.0]
position = [2.0, 0.0, 0.0]

[[bodies]]
name = "p"
type = "particle"
mass = 1.0
position = [3.0, 0.0, 0.0]

[[joints]]
name = "pivot"
type = "revolute"
body1 = "ground"
body2 = "a"
point = [0.0, 0.0, 0.0]
axis = [0.0, 0.0, 1.0]

[[joints]]
name = "ball"
type = "spherical"
body1 = "a"
body2 = "b"
point = [1.5, 0.0, 0.0]

[[drivers]]
name = "drive"
joint = "pivot"
motion = { input = "u" }

[[forces]]
name = "spring"
type = "spring_damper"
body1 = "b"
body2 = "p"
stiffness = "k"
"#;

/// Remove the `§` marker; return the text and the marker's 1-based line and column.
fn strip_marker(t: &str) -> (String, usize, usize) {
    let at = t.find('§').unwrap_or_else(|| panic!("no § marker in\n{t}"));
    let before = &t[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (t.replacen('§', "", 1), line, col)
}

fn load_err_at(text: &str, path: &Path) -> (String, ModelError) {
    match load_model_str(text, path) {
        Ok(_) => panic!("expected an error for\n{text}"),
        Err(e) => (e.to_string(), e),
    }
}

/// The message names `FILE:line:col` at the marker, the element and the problem.
fn expect(t: &str, element: &str, problem: &str) -> ModelError {
    let (text, line, col) = strip_marker(t);
    let (msg, e) = load_err_at(&text, Path::new(FILE));
    let prefix = format!("{FILE}:{line}:{col}: ");
    eprintln!("{msg}");
    assert!(
        msg.starts_with(&prefix),
        "expected location {prefix}\n     got: {msg}"
    );
    assert!(
        msg.contains(element),
        "element {element:?} missing in: {msg}"
    );
    assert!(
        msg.contains(problem),
        "problem {problem:?} missing in: {msg}"
    );
    e
}

fn replace(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

fn append(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

#[test]
fn the_base_model_is_valid() {
    let spec = load_model_str(BASE, Path::new(FILE)).unwrap();
    assert_eq!(spec.bodies.len(), 3);
}

// ----- TOML and schema ---------------------------------------------------------------------

#[test]
fn toml_syntax_error() {
    let e = expect(
        &replace("mass = 1.0\ninertia", "mass = §\ninertia"),
        "",
        "TOML syntax error: invalid string; expected `\"`, `'`",
    );
    assert!(matches!(e, ModelError::Syntax { .. }), "{e:?}");
    expect(
        &replace(
            "[[joints]]\nname = \"ball\"",
            "[[joints]]\nname = \"ball\" §\"x\"",
        ),
        "",
        "TOML syntax error: expected newline",
    );
}

#[test]
fn unknown_key_in_a_body() {
    expect(
        &replace("name = \"b\"\nmass = 1.0", "name = \"b\"\n§mas = 1.0"),
        "bodies[1] \"b\"",
        "unknown key `mas`",
    );
}

#[test]
fn unknown_section() {
    let e = expect(
        &append("[[§bodys]]\nname = \"c\"\n"),
        "",
        "unknown key `bodys`",
    );
    assert!(matches!(e, ModelError::Syntax { .. }));
}

#[test]
fn wrong_type() {
    expect(
        &replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = §true"),
        "bodies[1] \"b\"",
        "wrong type: boolean `true`, expected a number, a parameter name or an expression string",
    );
}

#[test]
fn missing_key() {
    expect(
        &replace(
            "[[bodies]]\nname = \"b\"\nmass = 1.0\n",
            "§[[bodies]]\nname = \"b\"\n",
        ),
        "bodies[1] \"b\"",
        "missing key `mass`",
    );
}

#[test]
fn key_that_does_not_apply_to_the_type() {
    expect(
        &replace("point = [0.0, 0.0, 0.0]\naxis", "point = [0.0, 0.0, 0.0]\nlength = §2.0\naxis"),
        "joints[0] \"pivot\"",
        "key `length` does not apply to a revolute joint (it uses: point, axis, x_axis, initial_angle, frame1, frame2)",
    );
}

#[test]
fn vector_with_two_components() {
    expect(
        &replace("position = [2.0, 0.0, 0.0]", "position = §[2.0, 0.0]"),
        "bodies[1] \"b\"",
        "`position` needs 3 components, got 2",
    );
}

/// Strings written into modelDescription.xml (descriptions, units) may not hold a character
/// XML 1.0 cannot represent, not even as a character reference: the FMU would be unreadable.
#[test]
fn control_character_in_a_string_of_the_model_description() {
    expect(
        &replace(
            "name = \"m\"\n",
            "name = \"m\"\ndescription = §\"Slider\\u000Ccrank\"\n",
        ),
        "[model]",
        "`description` contains the control character U+000C at character 7",
    );
    expect(
        &replace("unit = \"N/m\"", "unit = §\"N/m\\u0001\""),
        "parameters[0] \"k\"",
        "`unit` contains the control character U+0001 at character 4",
    );
    expect(
        &replace(
            "name = \"u\"\nstart = 0.0",
            "name = \"u\"\nstart = 0.0\ndescription = §\"a\\u001Fb\"",
        ),
        "inputs[0] \"u\"",
        "`description` contains the control character U+001F at character 2",
    );
    expect(
        &append("[[outputs]]\nname = \"e\"\ntype = \"energy\"\ndescription = §\"\\u0000\"\n"),
        "outputs[0] \"e\"",
        "`description` contains the control character U+0000 at character 1",
    );
    // Tab, line feed and carriage return are XML characters: accepted.
    let spec = load_model_str(
        &replace(
            "name = \"m\"\n",
            "name = \"m\"\ndescription = \"a\\tb\\nc\\rd\"\n",
        ),
        Path::new(FILE),
    )
    .unwrap();
    assert_eq!(spec.description, "a\tb\nc\rd");
}

#[test]
fn unknown_joint_type() {
    expect(
        &replace("type = \"revolute\"", "type = §\"hinge\""),
        "joints[0] \"pivot\"",
        "unknown joint type \"hinge\" (one of: revolute",
    );
}

#[test]
fn unknown_output_type() {
    expect(
        &append("[[outputs]]\nname = \"out\"\ntype = §\"speed\"\nbody = \"a\"\n"),
        "outputs[0] \"out\"",
        "unknown output type \"speed\"",
    );
}

#[test]
fn unknown_integrator() {
    expect(
        &append("[solver]\nintegrator = §\"rk4\"\n"),
        "[solver]",
        "unknown integrator \"rk4\" (one of: bdf, rosenbrock_nystrom",
    );
}

#[test]
fn unknown_initialization() {
    expect(
        &replace(
            "gravity = [0.0, -9.81, 0.0]",
            "gravity = [0.0, -9.81, 0.0]\ninitial = §\"steady\"",
        ),
        "[model]",
        "`initial` must be \"consistent\" or \"static\", got \"steady\"",
    );
}

// ----- names ---------------------------------------------------------------------------------

#[test]
fn duplicate_body_name() {
    expect(
        &replace("name = \"b\"\nmass", "name = §\"a\"\nmass"),
        "bodies[1] \"a\"",
        "duplicate name `a`: bodies and frames share one namespace",
    );
}

#[test]
fn body_named_ground() {
    expect(
        &replace("name = \"b\"\nmass", "name = §\"ground\"\nmass"),
        "bodies[1] \"ground\"",
        "the name `ground` is reserved",
    );
}

#[test]
fn output_named_like_a_parameter() {
    expect(
        &append("[[outputs]]\nname = §\"k\"\ntype = \"energy\"\n"),
        "outputs[0] \"k\"",
        "duplicate name `k`: parameters[0] \"k\" has it already (parameters, inputs and outputs share one namespace)",
    );
}

#[test]
fn input_named_time() {
    expect(
        &replace("name = \"u\"", "name = §\"time\""),
        "inputs[0] \"time\"",
        "name `time` is reserved for the independent variable",
    );
}

#[test]
fn reserved_solver_prefix() {
    expect(
        &replace("name = \"k\"", "name = §\"solver.rtol\""),
        "parameters[0] \"solver.rtol\"",
        "the prefixes `solver.` and `stats.` are reserved",
    );
}

#[test]
fn invalid_name() {
    expect(
        &replace("name = \"b\"\nmass", "name = §\"my body\"\nmass"),
        "bodies[1] \"my body\"",
        "name `my body` is not valid",
    );
}

/// The model name is the FMU library's file name: a name too long for a file system is refused
/// here, not by the importer that cannot unpack the FMU.
#[test]
fn model_name_too_long_for_a_file_name() {
    let long = "a".repeat(201);
    expect(
        &replace("name = \"m\"", &format!("name = §\"{long}\"")),
        "[model]",
        "name is 201 characters long: at most 200",
    );
    let ok = "a".repeat(200);
    load_model_str(
        &replace("name = \"m\"", &format!("name = \"{ok}\"")),
        Path::new(FILE),
    )
    .unwrap();
}

#[test]
fn duplicate_joint_name() {
    expect(
        &replace("name = \"ball\"", "name = §\"pivot\""),
        "joints[1] \"pivot\"",
        "duplicate joint name `pivot`",
    );
}

// ----- references ------------------------------------------------------------------------------

#[test]
fn joint_names_a_body_that_does_not_exist() {
    expect(
        &replace("body2 = \"b\"\npoint", "body2 = §\"c\"\npoint"),
        "joints[1] \"ball\"",
        "`body2`: no body or frame named `c` (the fixed world is \"ground\")",
    );
}

#[test]
fn driver_names_a_joint_that_does_not_exist() {
    expect(
        &replace("joint = \"pivot\"", "joint = §\"pivt\""),
        "drivers[0] \"drive\"",
        "no joint named `pivt` (did you mean `pivot`?)",
    );
}

#[test]
fn motion_names_an_input_that_does_not_exist() {
    expect(
        &append("[[drivers]]\nname = \"d2\"\nbody = \"p\"\ncomponent = \"z\"\nmotion = { input = §\"v\" }\n"),
        "drivers[1] \"d2\"",
        "no input named `v`",
    );
}

#[test]
fn expression_names_an_unknown_parameter() {
    // The column points into the string, at the unknown name.
    expect(
        &replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = \"2*§mm\""),
        "bodies[1] \"b\"",
        "in the expression \"2*mm\": unknown name `mm` (not a parameter)",
    );
    // A long expression is shown around the error, not whole (a 200 kB expression made a
    // 200 kB message until session 25).
    let long = format!("{}§mm", "1+".repeat(5000));
    let e = expect(
        &replace(
            "name = \"b\"\nmass = 1.0",
            &format!("name = \"b\"\nmass = \"{long}\""),
        ),
        "bodies[1] \"b\"",
        "+1+1+mm\": unknown name `mm` (not a parameter)",
    );
    let msg = e.to_string();
    assert!(
        msg.len() < 400 && msg.contains("in the expression \"…1+1+"),
        "{msg}"
    );
}

#[test]
fn expression_syntax_error() {
    expect(
        &replace(
            "name = \"b\"\nmass = 1.0",
            "name = \"b\"\nmass = \"2*(1 + 3§\"",
        ),
        "bodies[1] \"b\"",
        "missing `)`",
    );
}

#[test]
fn unused_input() {
    expect(
        &replace(
            "[[inputs]]\nname = \"u\"\nstart = 0.0\n",
            "[[inputs]]\nname = \"u\"\nstart = 0.0\n\n[[inputs]]\nname = §\"w\"\n",
        ),
        "inputs[1] \"w\"",
        "this input drives nothing",
    );
}

#[test]
fn output_names_an_unknown_force() {
    expect(
        &append("[[outputs]]\nname = \"f\"\ntype = \"element_force\"\nforce = §\"sprng\"\n"),
        "outputs[0] \"f\"",
        "no force element named `sprng` (did you mean `spring`?)",
    );
}

// ----- non-physical values -----------------------------------------------------------------------

#[test]
fn negative_mass() {
    expect(
        &replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = §-1.0"),
        "bodies[1] \"b\"",
        "`mass` must be positive, got -1 kg",
    );
}

#[test]
fn mass_parameter_with_zero_default() {
    let t = replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = §\"m_b\"");
    let t = t.replace(
        "[[inputs]]",
        "[[parameters]]\nname = \"m_b\"\nvalue = 0.0\n\n[[inputs]]",
    );
    expect(&t, "bodies[1] \"b\"", "`mass` must be positive, got 0 kg");
}

#[test]
fn inertia_not_positive_definite() {
    expect(
        &replace(
            "inertia = [1.0, 1.0, 1.0]\nposition = [2.0",
            "inertia = §[1.0, -1.0, 1.0]\nposition = [2.0",
        ),
        "bodies[1] \"b\"",
        "inertia is not positive definite",
    );
}

#[test]
fn full_inertia_not_positive_definite() {
    expect(
        &replace(
            "inertia = [1.0, 1.0, 1.0]\nposition = [2.0",
            "inertia = §{ xx = 1.0, yy = 1.0, zz = 1.0, xy = 2.0 }\nposition = [2.0",
        ),
        "bodies[1] \"b\"",
        "inertia is not positive definite (principal moments -1, 1, 3 kg m^2)",
    );
}

#[test]
fn inertia_violates_triangle_inequality() {
    expect(
        &replace("inertia = [1.0, 1.0, 1.0]\nposition = [2.0", "inertia = §[1.0, 1.0, 3.0]\nposition = [2.0"),
        "bodies[1] \"b\"",
        "inertia violates the triangle inequality: the largest principal moment 3 exceeds the sum of the others (1 + 1)",
    );
}

#[test]
fn quaternion_not_unit() {
    expect(
        &replace(
            "position = [2.0, 0.0, 0.0]",
            "position = [2.0, 0.0, 0.0]\norientation = §[1.0, 0.0, 0.0, 1.0]",
        ),
        "bodies[1] \"b\"",
        "`orientation` quaternion must have unit length",
    );
}

#[test]
fn zero_length_axis() {
    expect(
        &replace("axis = [0.0, 0.0, 1.0]", "axis = §[0.0, 0.0, 0.0]"),
        "joints[0] \"pivot\"",
        "`axis` has zero length",
    );
}

/// Directions are normalized whatever their magnitude: |a|² of [0, 0, 1e155] overflowed, and
/// the pendulum ran frozen with exit 0; [0, 0, 1e-155] was refused as zero.
#[test]
fn axes_of_any_magnitude_are_directions() {
    let unit = load_model_str(BASE, Path::new(FILE)).unwrap();
    for axis in [
        "[0.0, 0.0, 1e155]",
        "[0.0, 0.0, 1e300]",
        "[0.0, 0.0, 1e-155]",
    ] {
        let text = replace("axis = [0.0, 0.0, 1.0]", &format!("axis = {axis}"));
        let spec = load_model_str(&text, Path::new(FILE)).unwrap();
        for (a, b) in spec.joints.iter().zip(&unit.joints) {
            assert_eq!(a.frame1.axes, b.frame1.axes, "{axis}");
            assert_eq!(a.frame2.axes, b.frame2.axes, "{axis}");
        }
    }
}

/// The limit a master's input values meet applies to the file's start value too (1e300 reached
/// the road profile's spline as NaN and panicked).
#[test]
fn input_start_beyond_the_input_limit() {
    expect(
        &replace("start = 0.0", "start = §1e300"),
        "inputs[0] \"u\"",
        "inputs are limited to |u| <= 1e100",
    );
}

#[test]
fn x_axis_not_perpendicular() {
    expect(
        &replace(
            "axis = [0.0, 0.0, 1.0]",
            "axis = [0.0, 0.0, 1.0]\nx_axis = §[1.0, 0.0, 1.0]",
        ),
        "joints[0] \"pivot\"",
        "`x_axis` must be perpendicular to `axis` (they are 45.0000° apart)",
    );
}

#[test]
fn universal_axis2_not_perpendicular() {
    let t = replace("type = \"spherical\"", "type = \"universal\"").replace(
        "point = [1.5, 0.0, 0.0]",
        "point = [1.5, 0.0, 0.0]\naxis = [0.0, 0.0, 1.0]\naxis2 = §[0.0, 0.1, 1.0]",
    );
    expect(
        &t,
        "joints[1] \"ball\"",
        "`axis2` must be perpendicular to `axis`",
    );
}

#[test]
fn negative_stiffness() {
    let t = replace("stiffness = \"k\"", "stiffness = \"k\"")
        .replace("value = 100.0", "value = §-100.0");
    // The parameter's value is fine on its own; the spring that uses it is not.
    let (text, _, _) = strip_marker(&t);
    let msg = load_model_str(&text, Path::new(FILE))
        .unwrap_err()
        .to_string();
    let line = text.lines().position(|l| l == "stiffness = \"k\"").unwrap() + 1;
    assert!(msg.starts_with(&format!("{FILE}:{line}:13: ")), "{msg}");
    assert!(
        msg.contains("forces[0] \"spring\": `stiffness` must not be negative, got -100 N/m"),
        "{msg}"
    );
}

#[test]
fn negative_damping() {
    expect(
        &append("[[forces]]\nname = \"rs\"\ntype = \"rotational_spring_damper\"\njoint = \"pivot\"\nstiffness = 1.0\ndamping = §-0.5\n"),
        "forces[1] \"rs\"",
        "`damping` must not be negative, got -0.5 N m s/rad",
    );
}

#[test]
fn negative_contact_radius() {
    expect(
        &append("[[forces]]\nname = \"c\"\ntype = \"contact\"\ngeometry = \"sphere_plane\"\nsphere = \"p\"\nradius = §-0.1\nnormal = [0.0, 1.0, 0.0]\nstiffness = 1e5\n"),
        "forces[1] \"c\"",
        "`radius` must be positive, got -0.1 m",
    );
}

/// A zero contact stiffness from a parameter names the value and the parameter (the line points
/// at `stiffness = "k"`, where the parameter is used).
#[test]
fn zero_contact_stiffness_from_a_parameter() {
    let text = append("[[forces]]\nname = \"c\"\ntype = \"contact\"\ngeometry = \"sphere_plane\"\nsphere = \"p\"\nradius = 0.1\nnormal = [0.0, 1.0, 0.0]\nstiffness = §\"k\"\n")
        .replacen("value = 100.0", "value = 0.0", 1);
    expect(
        &text,
        "forces[1] \"c\"",
        "contact `stiffness` must be positive, got 0 N/m (parameter `k`)",
    );
}

#[test]
fn negative_rod_length() {
    expect(
        &append("[[joints]]\nname = \"rod\"\ntype = \"distance\"\nbody1 = \"b\"\nbody2 = \"p\"\npoint1 = [2.0, 0.0, 0.0]\npoint2 = [3.0, 0.0, 0.0]\nlength = §-1.0\n"),
        "joints[2] \"rod\"",
        "`length` must be positive, got -1 m",
    );
}

#[test]
fn revolute_joint_on_a_particle() {
    expect(
        &append("[[joints]]\nname = \"hinge\"\ntype = \"revolute\"\nbody1 = \"b\"\nbody2 = §\"p\"\npoint = [3.0, 0.0, 0.0]\naxis = [0.0, 0.0, 1.0]\n"),
        "joints[2] \"hinge\"",
        "body `p` is a particle (no orientation), but a revolute joint needs a rigid body",
    );
}

#[test]
fn spherical_joint_on_a_particle_away_from_it() {
    // Before: loaded, and the particle was silently held in place (0 degrees of freedom, its
    // initial velocity projected away).
    expect(
        &append("[[joints]]\nname = \"tether\"\ntype = \"spherical\"\nbody1 = \"ground\"\nbody2 = \"p\"\npoint = §[3.0, 0.0, -1.5]\n"),
        "joints[2] \"tether\"",
        "body `p` is a particle (no orientation), but the joint point [3, 0, -1.5] is 1.5 m away from it (offset [0, 0, -1.5] m): a particle cannot turn about a point away from it, so the joint would hold it at that offset (fixed in space, no degree of freedom left by this joint, its initial velocity discarded); put the joint point at the particle's position [3, 0, 0], or, for a point mass swinging about the point, use a `distance` joint",
    );
    // On a rigid body the particle would follow the body's point without turning.
    expect(
        &append("[[joints]]\nname = \"tether\"\ntype = \"spherical\"\nbody1 = \"p\"\nbody2 = \"b\"\npoint = §[2.5, 0.0, 0.0]\n"),
        "joints[2] \"tether\"",
        "(moved with body `b`'s joint point without turning,",
    );
    // Explicit frames: the particle's frame origin is the offset.
    expect(
        &append("[[joints]]\nname = \"tether\"\ntype = \"spherical\"\nbody1 = \"b\"\nbody2 = \"p\"\nframe1 = { origin = [1.0, 0.0, 0.0] }\nframe2 = §{ origin = [0.0, 0.2, 0.0] }\n"),
        "joints[2] \"tether\"",
        "offset [0, 0.2, 0] m",
    );
    // At the particle it is a joint like any other (the particle follows body b's point).
    let ok = append("[[joints]]\nname = \"tether\"\ntype = \"spherical\"\nbody1 = \"b\"\nbody2 = \"p\"\npoint = [3.0, 0.0, 0.0]\n");
    load_model_str(&ok, Path::new(FILE)).unwrap();
}

#[test]
fn inertia_on_a_particle() {
    expect(
        &replace(
            "type = \"particle\"\nmass = 1.0\n",
            "type = \"particle\"\nmass = 1.0\ninertia = §[1.0, 1.0, 1.0]\n",
        ),
        "bodies[2] \"p\"",
        "a particle has no `inertia`",
    );
}

#[test]
fn joint_connecting_a_body_to_itself() {
    expect(
        &replace("body2 = \"b\"\npoint", "body2 = §\"a\"\npoint"),
        "joints[1] \"ball\"",
        "connects body `a` to itself",
    );
}

#[test]
fn joint_between_two_ground_points() {
    expect(
        &replace(
            "body2 = \"a\"\npoint = [0.0",
            "body2 = §\"ground\"\npoint = [0.0",
        ),
        "joints[0] \"pivot\"",
        "connects ground to itself",
    );
}

#[test]
fn joint_between_a_moving_frame_and_ground() {
    expect(
        &append("[[frames]]\nname = \"base\"\nposition = [0.0, \"u\", 0.0]\n\n[[joints]]\nname = \"j\"\ntype = \"fixed\"\nbody1 = \"ground\"\nbody2 = §\"base\"\npoint = [0.0, 0.0, 0.0]\n"),
        "joints[2] \"j\"",
        "connects ground to frame `base`: at least one end must be a body",
    );
}

#[test]
fn missing_joint_axis() {
    expect(
        &replace(
            "[[joints]]\nname = \"pivot\"",
            "§[[joints]]\nname = \"pivot\"",
        )
        .replace("axis = [0.0, 0.0, 1.0]\n", ""),
        "joints[0] \"pivot\"",
        "missing key `axis` (a revolute joint needs it)",
    );
}

// ----- drivers, forces, motions ----------------------------------------------------------------

#[test]
fn driver_on_a_joint_without_a_coordinate() {
    expect(
        &append("[[drivers]]\nname = \"d2\"\njoint = §\"ball\"\nmotion = 0.0\n"),
        "drivers[1] \"d2\"",
        "joint `ball` is a spherical joint: drivers act on the single coordinate of a revolute or prismatic joint only",
    );
}

#[test]
fn two_drivers_on_one_joint() {
    expect(
        &append("[[drivers]]\nname = \"d2\"\njoint = §\"pivot\"\nmotion = 0.0\n"),
        "drivers[1] \"d2\"",
        "driver `drive` already prescribes this coordinate",
    );
}

#[test]
fn driver_with_joint_and_body() {
    expect(
        &append("[[drivers]]\nname = \"d2\"\njoint = \"pivot\"\nbody = §\"p\"\nmotion = 0.0\n"),
        "drivers[1] \"d2\"",
        "give either `joint` (joint coordinate) or `body` (point component), not both",
    );
}

#[test]
fn point_driver_on_ground() {
    expect(
        &append(
            "[[drivers]]\nname = \"d2\"\nbody = §\"ground\"\ncomponent = \"x\"\nmotion = 0.0\n",
        ),
        "drivers[1] \"d2\"",
        "a point driver needs a body, not ground",
    );
}

#[test]
fn friction_on_a_revolute_joint() {
    expect(
        &append("[[forces]]\nname = \"fr\"\ntype = \"prismatic_friction\"\njoint = §\"pivot\"\nmu = 0.2\n"),
        "forces[1] \"fr\"",
        "joint `pivot` is a revolute joint; prismatic_friction needs a prismatic joint",
    );
}

#[test]
fn smooth_step_with_zero_duration() {
    expect(
        &replace("motion = { input = \"u\" }", "motion = { type = \"smooth_step\", final = 1.0, duration = §0.0 }\n\n[[drivers]]\nname = \"d2\"\nbody = \"p\"\ncomponent = \"z\"\nmotion = \"u\""),
        "drivers[0] \"drive\"",
        "`duration` must be positive, got 0 s",
    );
}

#[test]
fn unknown_motion_type() {
    expect(
        &append("[[drivers]]\nname = \"d2\"\nbody = \"p\"\ncomponent = \"z\"\nmotion = { type = §\"cosine\", amplitude = 1.0 }\n"),
        "drivers[1] \"d2\"",
        "unknown motion type `cosine`",
    );
}

#[test]
fn output_coordinate_of_a_spherical_joint() {
    expect(
        &append("[[outputs]]\nname = \"q\"\ntype = \"joint_coordinate\"\njoint = §\"ball\"\n"),
        "outputs[0] \"q\"",
        "joint `ball` is a spherical joint: `joint_coordinate` and `joint_rate` read the single coordinate of a revolute or prismatic joint only",
    );
}

#[test]
fn tunable_mass_parameter() {
    let t = replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = \"m_b\"").replace(
        "[[inputs]]",
        "[[parameters]]\nname = \"m_b\"\nvalue = 2.0\ntunable = §true\n\n[[inputs]]",
    );
    expect(&t, "parameters[1] \"m_b\"", "cannot be tunable: it is used in bodies[1] \"b\" `mass`, which is fixed after initialization");
}

// ----- experiment ----------------------------------------------------------------------------------

#[test]
fn experiment_stop_before_start() {
    expect(
        &append("[experiment]\nstart = 1.0\nstop = §0.5\n"),
        "[experiment]",
        "`stop` (0.5) must be after `start` (1)",
    );
}

#[test]
fn experiment_tolerance_not_positive() {
    expect(
        &append("[experiment]\ntolerance = §0.0\n"),
        "[experiment]",
        "`tolerance` must be in [1e-14, 1) (a relative tolerance), got 0",
    );
}

#[test]
fn experiment_tolerance_and_rtol_not_below_one() {
    expect(
        &append("[experiment]\ntolerance = §1.0\n"),
        "[experiment]",
        "`tolerance` must be in [1e-14, 1) (a relative tolerance), got 1",
    );
    expect(
        &append("[solver]\nrtol = §2.5\n"),
        "[solver]",
        "`rtol` must be in [1e-14, 1) (a relative tolerance), got 2.5",
    );
    // Small values read as numbers (until session 25: "got 0.000000000000001").
    expect(
        &append("[solver]\nrtol = §1e-15\n"),
        "[solver]",
        "`rtol` must be in [1e-14, 1) (a relative tolerance), got 1e-15",
    );
    expect(
        &append("[solver]\nfixed_step = §-1e-300\n"),
        "[solver]",
        "`fixed_step` must be positive, got -1e-300",
    );
}

// ----- table files -----------------------------------------------------------------------------------

fn table_dir(name: &str, csv: Option<&str>) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("mbsfmu-model-errors-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(csv) = csv {
        std::fs::write(dir.join("profile.csv"), csv).unwrap();
    }
    dir
}

fn table_case(name: &str, csv: Option<&str>, problem: &str) {
    let dir = table_dir(name, csv);
    let path = dir.join("model.toml");
    let t = append("[[drivers]]\nname = \"d2\"\nbody = \"p\"\ncomponent = \"z\"\nmotion = { table = §\"profile.csv\" }\n");
    let (text, line, col) = strip_marker(&t);
    let (msg, _) = load_err_at(&text, &path);
    let prefix = format!(
        "{}:{line}:{col}: drivers[1] \"d2\": table file `{}`: ",
        path.display(),
        dir.join("profile.csv").display()
    );
    assert!(
        msg.starts_with(&prefix),
        "expected {prefix}\n     got {msg}"
    );
    assert!(msg.contains(problem), "{problem:?} missing in {msg}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn table_file_missing() {
    table_case("missing", None, "cannot read the table file");
}

#[test]
fn table_not_increasing() {
    table_case(
        "order",
        Some("t,z\n0,0\n1,0.1\n0.5,0.2\n"),
        "line 4: the first column must be strictly increasing (0.5 follows 1)",
    );
}

#[test]
fn table_not_numeric() {
    table_case(
        "text",
        Some("t,z\n0,0\n1,ten\n"),
        "line 3: column 2: `ten` is not a finite number",
    );
}

#[test]
fn table_too_short() {
    table_case(
        "short",
        Some("t,z\n0,0\n"),
        "1 data rows, at least 2 are needed",
    );
}

#[test]
fn good_table_is_recorded_as_a_source_file() {
    let dir = table_dir("good", Some("t,z\n0,0\n1,0.1\n"));
    let path = dir.join("model.toml");
    let text = append("[[drivers]]\nname = \"d2\"\nbody = \"p\"\ncomponent = \"z\"\nmotion = { table = \"profile.csv\" }\n");
    let spec = load_model_str(&text, &path).unwrap();
    assert_eq!(
        spec.source_files,
        vec![path.clone(), dir.join("profile.csv")]
    );
    std::fs::remove_dir_all(dir).ok();
}

// ----- characteristic curves (torsion and bushing tables), joint reaction frames ----------------

/// `extra` appended to the base model in a temporary directory holding `files`; the error must
/// be at the `§` marker, name the element and contain `problem`.
fn curve_case(name: &str, files: &[(&str, &str)], extra: &str, element: &str, problem: &str) {
    let dir = table_dir(name, None);
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
    let path = dir.join("model.toml");
    let (text, line, col) = strip_marker(&append(extra));
    let (msg, _) = load_err_at(&text, &path);
    eprintln!("{msg}");
    let prefix = format!("{}:{line}:{col}: {element}: ", path.display());
    assert!(
        msg.starts_with(&prefix),
        "expected {prefix}\n     got {msg}"
    );
    assert!(msg.contains(problem), "{problem:?} missing in {msg}");
    std::fs::remove_dir_all(dir).ok();
}

const TORSION: &str =
    "[[forces]]\nname = \"tors\"\ntype = \"rotational_spring_damper\"\njoint = \"pivot\"\n";
const MOUNT: &str =
    "[[forces]]\nname = \"mount\"\ntype = \"bushing\"\nbody1 = \"a\"\nbody2 = \"b\"\n";
const GOOD_CSV: &str = "x,f\n-1,-10\n0,0\n1,10\n";

#[test]
fn torsion_table_with_stiffness_or_damping_too() {
    curve_case(
        "tors-k",
        &[("t.csv", GOOD_CSV)],
        &format!("{TORSION}stiffness = §50.0\ntable = \"t.csv\"\n"),
        "forces[1] \"tors\"",
        "give `stiffness` (linear) or `table` (a curve), not both",
    );
    curve_case(
        "tors-c",
        &[("d.csv", GOOD_CSV)],
        &format!("{TORSION}damping = §2.0\ndamper_table = \"d.csv\"\n"),
        "forces[1] \"tors\"",
        "give `damping` (linear) or `damper_table` (a curve), not both",
    );
}

#[test]
fn torsion_table_missing_or_not_increasing() {
    curve_case(
        "tors-missing",
        &[],
        &format!("{TORSION}table = §\"nowhere.csv\"\n"),
        "forces[1] \"tors\"",
        "nowhere.csv`: cannot read the table file",
    );
    curve_case(
        "tors-order",
        &[("t.csv", "angle,torque\n-0.5,-5\n0.5,5\n0.2,2\n")],
        &format!("{TORSION}table = §\"t.csv\"\n"),
        "forces[1] \"tors\"",
        "t.csv`: line 4: the first column must be strictly increasing (0.2 follows 0.5)",
    );
}

#[test]
fn bushing_table_on_an_axis_with_a_stiffness() {
    curve_case(
        "mount-k",
        &[("z.csv", GOOD_CSV)],
        &format!("{MOUNT}stiffness = [1e4, 1e4, 2e4]\ntables = {{ z = §\"z.csv\" }}\n"),
        "forces[1] \"mount\"",
        "`tables.z` replaces the linear stiffness of component z, but `stiffness` gives it 20000 too: set that component of `stiffness` to 0 or drop the table",
    );
    curve_case(
        "mount-kr",
        &[("r.csv", GOOD_CSV)],
        &format!("{MOUNT}rot_stiffness = [\"k\", 0.0, 0.0]\ntables = {{ rx = §\"r.csv\" }}\n"),
        "forces[1] \"mount\"",
        "`rot_stiffness` gives it parameter `k` too",
    );
    // A zero stiffness on the table's axis is fine.
    let dir = table_dir("mount-ok", None);
    std::fs::write(dir.join("z.csv"), GOOD_CSV).unwrap();
    let text = append(&format!(
        "{MOUNT}stiffness = [1e4, 1e4, 0.0]\ntables = {{ z = \"z.csv\" }}\n"
    ));
    let spec = load_model_str(&text, &dir.join("model.toml")).unwrap();
    assert!(spec.source_files.contains(&dir.join("z.csv")));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bushing_table_bad_file_or_axis() {
    curve_case(
        "mount-order",
        &[("z.csv", "d,f\n0,0\n0,1\n")],
        &format!("{MOUNT}tables = {{ z = §\"z.csv\" }}\n"),
        "forces[1] \"mount\"",
        "line 3: the first column must be strictly increasing (0 follows 0)",
    );
    curve_case(
        "mount-short",
        &[("z.csv", "d,f\n0,0\n")],
        &format!("{MOUNT}tables = {{ z = §\"z.csv\" }}\n"),
        "forces[1] \"mount\"",
        "1 data rows, at least 2 are needed",
    );
    expect(
        &append(&format!("{MOUNT}tables = {{ §w = \"z.csv\" }}\n")),
        "forces[1] \"mount\"",
        "unknown key `w`, expected one of `x`, `y`, `z`, `rx`, `ry`, `rz`",
    );
    // `tables` belongs to bushings only.
    expect(
        &append(&format!("{TORSION}tables = §{{ z = \"z.csv\" }}\n")),
        "forces[1] \"tors\"",
        "key `tables` does not apply to a rotational_spring_damper on a joint",
    );
}

#[test]
fn joint_reaction_frame_and_axial_component() {
    let out = |body: &str| {
        format!("[[outputs]]\nname = \"r\"\ntype = \"joint_force\"\njoint = \"pivot\"\n{body}")
    };
    expect(
        &append(&out("component = \"x\"\nframe = §\"nowhere\"\n")),
        "outputs[0] \"r\"",
        "`frame`: \"nowhere\" is neither \"frame1\", \"frame2\" (the joint's frames) nor a body, frame or \"ground\"",
    );
    expect(
        &append(&out("component = \"x\"\nframe = §\"p\"\n")),
        "outputs[0] \"r\"",
        "is a particle (no orientation), but the `frame` of a joint_force output needs a rigid body",
    );
    expect(
        &append(&out("component = §\"axial\"\n")),
        "outputs[0] \"r\"",
        "`component = \"axial\"` is the rod force of a distance joint; joint `pivot` is a revolute joint",
    );
    let rod = "[[joints]]\nname = \"rod\"\ntype = \"distance\"\nbody1 = \"ground\"\nbody2 = \"p\"\npoint1 = [3.0, 1.0, 0.0]\npoint2 = [3.0, 0.0, 0.0]\n";
    let rod_out = |body: &str| {
        format!("{rod}[[outputs]]\nname = \"r\"\ntype = \"joint_force\"\njoint = \"rod\"\n{body}")
    };
    expect(
        &append(&rod_out("component = \"axial\"\nframe = §\"frame2\"\n")),
        "outputs[0] \"r\"",
        "`frame` does not apply to the axial rod force",
    );
    expect(
        &append(
            &rod_out("type = \"joint_torque\"\ncomponent = §\"axial\"\n").replacen(
                "type = \"joint_force\"\n",
                "",
                1,
            ),
        ),
        "outputs[0] \"r\"",
        "is for `joint_force` on a distance joint",
    );
    let spec = load_model_str(
        &append(&rod_out("component = \"axial\"\n")),
        Path::new(FILE),
    )
    .unwrap();
    assert_eq!(spec.outputs[0].unit, "N");
}

#[test]
fn relative_output_joint_frames() {
    let rel = |keys: &str| {
        format!("[[outputs]]\nname = \"d\"\ntype = \"relative_position\"\nbody1 = \"a\"\nbody2 = \"b\"\ncomponent = \"x\"\n{keys}")
    };
    expect(
        &append(&rel("frame = §\"frame2\"\n")),
        "outputs[0] \"d\"",
        "`frame = \"frame2\"` is a joint's frame: give the joint with `joint`",
    );
    expect(
        &append(&rel("joint = \"pivot\"\nframe = §\"b\"\n")),
        "outputs[0] \"d\"",
        "with `joint`, `frame` is \"frame1\" or \"frame2\" (that joint's frames), got \"b\"",
    );
    let spec = load_model_str(
        &append(&rel("joint = \"ball\"\nframe = \"frame2\"\n")),
        Path::new(FILE),
    )
    .unwrap();
    assert_eq!(spec.outputs[0].unit, "m");
}

#[test]
fn element_component_only_on_bushings() {
    expect(
        &append("[[outputs]]\nname = \"f\"\ntype = \"element_force\"\nforce = \"spring\"\ncomponent = §\"x\"\n"),
        "outputs[0] \"f\"",
        "`component` selects one of a bushing's six components; `spring` is not a bushing",
    );
    let mount = format!("{MOUNT}stiffness = [1e4, 1e4, 1e4]\n");
    expect(
        &append(&format!("{mount}[[outputs]]\nname = \"f\"\ntype = \"element_length\"\nforce = \"mount\"\ncomponent = §\"w\"\n")),
        "outputs[0] \"f\"",
        "`component` of a bushing is one of \"x\", \"y\", \"z\", \"rx\", \"ry\", \"rz\", got \"w\"",
    );
    let spec = load_model_str(
        &append(&format!("{mount}[[outputs]]\nname = \"t\"\ntype = \"element_force\"\nforce = \"mount\"\ncomponent = \"ry\"\n")),
        Path::new(FILE),
    )
    .unwrap();
    assert_eq!(spec.outputs[0].unit, "N.m");
}

// ----- every message starts with the file ---------------------------------------------------------

#[test]
fn every_message_starts_with_the_file_path() {
    let cases = [
        "not toml at all [",
        "[model]\nname = \"x\"\n",
        "[model]\nname = \"x\"\ngravity = [0, 0, 0]\n[[bodies]]\nname = \"a\"\nmass = 0\nposition = [0, 0, 0]\ninertia = [1, 1, 1]\n",
        "",
    ];
    for c in cases {
        let msg = load_model_str(c, Path::new(FILE)).unwrap_err().to_string();
        assert!(msg.starts_with(&format!("{FILE}:")), "{msg}");
    }
    let missing = Path::new("no/such/model.toml");
    let msg = load_model(missing).unwrap_err().to_string();
    assert!(
        msg.starts_with("no/such/model.toml: cannot read the model file"),
        "{msg}"
    );
}

#[test]
fn nested_tables_report_their_own_keys() {
    expect(
        &replace(
            "motion = { input = \"u\" }",
            "motion = { input = \"u\", §gain = 2.0 }",
        ),
        "drivers[0] \"drive\"",
        "unknown key `gain`",
    );
    expect(
        &replace(
            "motion = { input = \"u\" }",
            "motion = { input = \"u\", table = §\"x.csv\" }",
        ),
        "drivers[0] \"drive\"",
        "key `table` does not apply to an input motion `motion` (it uses: input)",
    );
    expect(
        &replace(
            "inertia = [1.0, 1.0, 1.0]\nposition = [2.0",
            "inertia = { xx = 1.0, yy = 1.0, §zx = 0.0 }\nposition = [2.0",
        ),
        "bodies[1] \"b\"",
        "unknown key `zx`",
    );
}

/// Mangled versions of every gallery model: the loader returns an error or a model, never
/// panics, and every error message starts with the file path.
#[test]
fn mangled_models_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let junk = [
        "",
        "0",
        "-1",
        "\"x\"",
        "[",
        "]",
        "=",
        "\n",
        "\"ground\"",
        "1e400",
        "nan",
        "{}",
        "[0,0]",
        "\"pi/0\"",
    ];
    let mut errors = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for _ in 0..150 {
            let mut t = text.clone();
            for _ in 0..1 + next() % 3 {
                let mut at = (next() as usize) % t.len();
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                let mut end = (at + (next() as usize) % 12).min(t.len());
                while !t.is_char_boundary(end) {
                    end -= 1;
                }
                t.replace_range(at..end, junk[(next() as usize) % junk.len()]);
            }
            if let Err(e) = load_model_str(&t, &path) {
                errors += 1;
                assert!(
                    e.to_string().starts_with(&path.display().to_string()),
                    "{e}"
                );
            }
        }
    }
    assert!(errors > 500, "most mangled files are wrong ({errors})");
}

// ----- joint friction with stiction, joint stops ----------------------------------------------

#[test]
fn static_friction_below_kinetic() {
    expect(
        &append("[[forces]]\nname = \"fr\"\ntype = \"revolute_friction\"\njoint = \"pivot\"\nradius = 0.01\nmu = 0.4\nmu_static = §0.3\nstiction_stiffness = 1e4\n"),
        "forces[1] \"fr\"",
        "`mu_static` = 0.3 is below the kinetic `mu` = 0.4",
    );
}

#[test]
fn stiction_key_without_static_friction() {
    expect(
        &append("[[forces]]\nname = \"fr\"\ntype = \"revolute_friction\"\njoint = \"pivot\"\nradius = 0.01\nmu = 0.4\nstiction_stiffness = §1e4\n"),
        "forces[1] \"fr\"",
        "key `stiction_stiffness` needs `mu_static`",
    );
}

#[test]
fn stop_without_limits() {
    expect(
        &append("§[[forces]]\nname = \"st\"\ntype = \"joint_stop\"\njoint = \"pivot\"\nstiffness = 1e3\n"),
        "forces[1] \"st\"",
        "a joint_stop needs `lower`, `upper` or both",
    );
}

#[test]
fn stop_restitution_out_of_range() {
    expect(
        &append("[[forces]]\nname = \"st\"\ntype = \"joint_stop\"\njoint = \"pivot\"\nupper = 0.5\nstiffness = 1e3\nrestitution = §1.5\n"),
        "forces[1] \"st\"",
        "`restitution` must be in (0, 1], got 1.5",
    );
}

#[test]
fn stop_with_damping_and_restitution() {
    expect(
        &append("[[forces]]\nname = \"st\"\ntype = \"joint_stop\"\njoint = \"pivot\"\nupper = 0.5\nstiffness = 1e3\ndamping = 2.0\nrestitution = §0.5\n"),
        "forces[1] \"st\"",
        "give either `damping` or `restitution`, not both",
    );
}

// ----- contact friction -----------------------------------------------------------------------

/// A sphere_plane contact on the particle with `extra` keys.
fn contact_with(extra: &str) -> String {
    append(&format!("[[forces]]\nname = \"c\"\ntype = \"contact\"\ngeometry = \"sphere_plane\"\nsphere = \"p\"\nradius = 0.1\nnormal = [0.0, 1.0, 0.0]\nstiffness = 1e5\n{extra}"))
}

#[test]
fn contact_static_friction_below_kinetic() {
    expect(
        &contact_with("mu = 0.5\nmu_static = §0.4\nstiction_stiffness = 1e6\n"),
        "forces[1] \"c\"",
        "`mu_static` = 0.4 is below the kinetic `mu` = 0.5",
    );
}

#[test]
fn contact_negative_friction_coefficient() {
    expect(
        &contact_with("mu = §-0.2\n"),
        "forces[1] \"c\"",
        "`mu` must not be negative, got -0.2",
    );
    expect(
        &contact_with("mu = 0.2\nv_reg = §0.0\n"),
        "forces[1] \"c\"",
        "`v_reg` must be positive, got 0 m/s",
    );
    expect(
        &contact_with(
            "mu = 0.2\nmu_static = 0.3\nstiction_stiffness = 1e6\nstiction_damping = §-5.0\n",
        ),
        "forces[1] \"c\"",
        "`stiction_damping` must not be negative, got -5 N s/m",
    );
}

#[test]
fn contact_static_friction_without_anchor_stiffness() {
    expect(
        &contact_with("mu = 0.2\nmu_static = 0.3\n")
            .replace("[[forces]]\nname = \"c\"", "§[[forces]]\nname = \"c\""),
        "forces[1] \"c\"",
        "missing key `stiction_stiffness` (friction with `mu_static` needs it)",
    );
}

#[test]
fn contact_friction_key_without_mu() {
    expect(
        &contact_with("mu_static = §0.3\nstiction_stiffness = 1e6\n"),
        "forces[1] \"c\"",
        "key `mu_static` needs `mu`",
    );
}

#[test]
fn contact_friction_output_on_a_frictionless_contact() {
    expect(
        &contact_with("\n[[outputs]]\nname = \"f\"\ntype = \"contact_friction\"\nforce = §\"c\"\ncomponent = \"fx\"\n"),
        "outputs[0] \"f\"",
        "force element `c` is not a contact with friction (`mu`)",
    );
    expect(
        &contact_with("mu = 0.3\n\n[[outputs]]\nname = \"f\"\ntype = \"contact_friction\"\nforce = \"c\"\ncomponent = §\"torque\"\n"),
        "outputs[0] \"f\"",
        "unknown contact_friction component `torque` (one of: fx, fy, fz, slip, stick)",
    );
}

#[test]
fn a_spring_with_a_given_and_a_computed_preload() {
    // As for a bushing: the two were added silently.
    expect(
        &replace(
            "stiffness = \"k\"\n",
            "stiffness = \"k\"\npreload = 5.0\nstatic_preload = §true\n",
        ),
        "spring",
        "`static_preload = true` computes the preload: give it or `preload`, not both",
    );
}

/// Masses more than 1e12 apart are refused at the heavier body, naming both (a mass of 1e300
/// beside 0.3 kg failed every integrator's start with "singular saddle-point matrix" and no
/// body named; a particle of 1e-14 kg the same). A spread of 1e11 still loads.
#[test]
fn masses_too_far_apart() {
    expect(
        &replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = §1e300"),
        "bodies[1] \"b\"",
        "`mass` 1e300 kg is 1.0e300 times the mass of body `a` (1.0 kg); beyond 1e12",
    );
    let light = replace("name = \"a\"\nmass = 1.0", "name = \"a\"\nmass = §1.0").replacen(
        "type = \"particle\"\nmass = 1.0",
        "type = \"particle\"\nmass = 1e-13",
        1,
    );
    expect(
        &light,
        "bodies[0] \"a\"",
        "times the mass of body `p` (1e-13 kg)",
    );
    let spread = replace("name = \"b\"\nmass = 1.0", "name = \"b\"\nmass = 1e11");
    load_model_str(&spread, Path::new(FILE)).unwrap();
}

// ----- units -------------------------------------------------------------------------------

/// The engine takes a parameter in SI units where an element reads it, so a unit whose factor
/// is not 1 would make an importer that converts units off by that factor (`g` on a mass: by
/// 1000; it was written with `factor="0.001"` silently). A warning naming the unit and the SI
/// unit, not a refusal: a parameter that only expressions read may be in any unit they convert
/// (`angle = "angle_deg*pi/180"`).
#[test]
fn parameter_unit_other_than_si_is_a_warning() {
    let warned = |marked: &str, element: &str, text: &str| {
        let (src, line, col) = strip_marker(marked);
        let spec = load_model_str(&src, Path::new(FILE)).unwrap();
        let want = format!("{FILE}:{line}:{col}: {element}: {text}");
        assert!(
            spec.warnings.iter().any(|w| w.starts_with(&want)),
            "{want:?} not in {:?}",
            spec.warnings
        );
    };
    warned(
        &replace("unit = \"N/m\"", "unit = §\"N/mm\""),
        "parameters[0] \"k\"",
        "`unit` = \"N/mm\" is 1000 N/m, but an element that takes this parameter's value takes it in N/m",
    );
    warned(
        &replace("name = \"a\"\nmass = 1.0", "name = \"a\"\nmass = \"m_a\"").replacen(
            "[[inputs]]",
            "[[parameters]]\nname = \"m_a\"\nvalue = 1.0\nunit = §\"g\"\n\n[[inputs]]",
            1,
        ),
        "parameters[1] \"m_a\"",
        "`unit` = \"g\" is 0.001 kg, but an element that takes this parameter's value takes it in kg",
    );
    // Another name of the SI unit: no warning.
    let ok = replace("unit = \"N/m\"", "unit = \"kg/s2\"");
    let spec = load_model_str(&ok, Path::new(FILE)).unwrap();
    assert!(
        !spec.warnings.iter().any(|w| w.contains("unit")),
        "{:?}",
        spec.warnings
    );
}

/// An input used bare is taken in SI units; in other units it is fed through an input
/// expression that converts it.
#[test]
fn input_unit_is_si_unless_an_expression_converts_it() {
    let deg = replace("name = \"u\"\n", "name = \"u\"\nunit = §\"deg\"\n");
    expect(
        &deg,
        "inputs[0] \"u\"",
        "`unit` = \"deg\" is pi/180 rad, but an element takes this input's bare value in SI units: give the input in rad",
    );
    assert!(load_err_at(&strip_marker(&deg).0, Path::new(FILE))
        .0
        .contains("(`\"u*pi/180\"`)"));
    let converted =
        strip_marker(&deg)
            .0
            .replacen("motion = { input = \"u\" }", "motion = \"u*pi/180\"", 1);
    let spec = load_model_str(&converted, Path::new(FILE)).unwrap();
    assert_eq!(spec.inputs[0].unit, "deg");
}

/// An output's unit is that of its value, `scale ×` the quantity: the quantity's dimension and
/// the factor `1/|scale|`. Previously a position in `deg` was written with a BaseUnit in
/// rad, and `deg` on an angle without `scale` claimed degrees for a value in radians.
#[test]
fn output_unit_must_match_the_quantity_and_the_scale() {
    let out = |extra: &str| {
        append(&format!(
            "[[outputs]]\nname = \"y\"\ntype = \"joint_coordinate\"\njoint = \"pivot\"\n{extra}"
        ))
    };
    expect(
        &out("unit = §\"deg\"\n"),
        "outputs[0] \"y\"",
        "`unit` = \"deg\" is pi/180 rad, but the output's value is the quantity in rad (no `scale`): give `scale` = \"180/pi\" to output it in deg",
    );
    expect(
        &out("unit = §\"m\"\n"),
        "outputs[0] \"y\"",
        "`unit` = \"m\" is a unit of m, but this output is a quantity in rad: give a unit of that dimension",
    );
    expect(
        &out("unit = §\"rad\"\nscale = 2.0\n"),
        "outputs[0] \"y\"",
        "`unit` = \"rad\" is 1 rad, but the output's value is `scale` = 2 times the quantity in rad",
    );
    for ok in [
        "unit = \"deg\"\nscale = \"180/pi\"\n",
        "unit = \"deg\"\nscale = \"-180/pi\"\n",
        "unit = \"rad\"\nscale = -1.0\n",
        "scale = 2.0\n",
    ] {
        load_model_str(&out(ok), Path::new(FILE)).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    let mm = append(
        "[[outputs]]\nname = \"y\"\ntype = \"position\"\nbody = \"p\"\ncomponent = \"x\"\nunit = \"mm\"\nscale = 1000\n",
    );
    load_model_str(&mm, Path::new(FILE)).unwrap();
}

/// A unit mbsfmu does not know is a warning naming it, with its location; the FMU declares it
/// without SI base units.
#[test]
fn unknown_unit_is_a_warning() {
    let (text, line, col) = strip_marker(&replace("unit = \"N/m\"", "unit = §\"furlong\""));
    let spec = load_model_str(&text, Path::new(FILE)).unwrap();
    let want = format!(
        "{FILE}:{line}:{col}: parameters[0] \"k\": unit \"furlong\" is not one mbsfmu knows"
    );
    assert!(
        spec.warnings.iter().any(|w| w.starts_with(&want)),
        "{:?}",
        spec.warnings
    );
    let table = mbsfmu::description::VariableTable::from_spec(&spec);
    let md = mbsfmu::description::xml::ModelDescription::new(
        &spec,
        &table,
        mbsfmu::description::xml::FmiVersion::Fmi2,
        "{00000000-0000-0000-0000-000000000000}",
        "2026-01-01T00:00:00Z",
        mbsfmu::description::Capabilities::RUNTIME,
    );
    let xml = md.to_xml().unwrap();
    let at = xml.find("<Unit name=\"furlong\"").expect("declared");
    let unit = &xml[at..at + xml[at..].find('>').unwrap() + 1];
    assert!(unit.ends_with("/>"), "no BaseUnit: {unit}");
}
