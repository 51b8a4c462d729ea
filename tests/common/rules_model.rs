//! The rule model of `tests/dependencies.rs` and `tests/input_expressions.rs`.

/// Every rule of the table in one model: a frame moved by an input carries a prismatic joint
/// and a spring; an actuator input on another spring; outputs of every kind.
pub const RULES: &str = r#"
[model]
name = "rules"
gravity = [0.0, 0.0, -9.81]
[[inputs]]
name = "base_z"
[[inputs]]
name = "push"
[[inputs]]
name = "turn"
# The base moves diagonally: along the slide (travel, spring) and across it (reactions).
[[frames]]
name = "base"
position = ["base_z", 0.0, "base_z"]
[[bodies]]
name = "slider"
mass = 2.0
inertia = [0.1, 0.1, 0.1]
position = [0.0, 0.0, 0.5]
[[bodies]]
name = "arm"
mass = 1.0
inertia = [0.01, 0.1, 0.1]
position = [0.5, 0.0, 0.5]
[[bodies]]
name = "bob"
mass = 1.0
inertia = [0.01, 0.01, 0.01]
position = [0.0, 1.0, 0.0]
[[joints]]
name = "slide"
type = "prismatic"
body1 = "base"
body2 = "slider"
point = [0.0, 0.0, 0.5]
axis = [0.0, 0.0, 1.0]
[[joints]]
name = "hinge"
type = "revolute"
body1 = "slider"
body2 = "arm"
point = [0.0, 0.0, 0.5]
axis = [0.0, 1.0, 0.0]
[[joints]]
name = "bob_slide"
type = "prismatic"
body1 = "ground"
body2 = "bob"
point = [0.0, 1.0, 0.0]
axis = [0.0, 0.0, 1.0]
[[drivers]]
name = "turn_drive"
joint = "hinge"
motion = "turn"
[[forces]]
name = "lift"
type = "spring_damper"
body1 = "base"
point1 = [0.3, 0.0, 0.0]
body2 = "slider"
stiffness = 1000.0
damping = 10.0
[[forces]]
name = "bob_spring"
type = "spring_damper"
body1 = "ground"
point1 = [0.0, 1.0, -0.5]
body2 = "bob"
stiffness = 500.0
actuator = "push"
[[outputs]]
name = "base_pos"
type = "position"
body = "base"
component = "z"
[[outputs]]
name = "base_vel"
type = "velocity"
body = "base"
component = "z"
[[outputs]]
name = "slider_pos"
type = "position"
body = "slider"
component = "z"
[[outputs]]
name = "travel"
type = "joint_coordinate"
joint = "slide"
[[outputs]]
name = "travel_rate"
type = "joint_rate"
joint = "slide"
[[outputs]]
name = "hinge_angle"
type = "joint_coordinate"
joint = "hinge"
[[outputs]]
name = "arm_angle"
type = "angle"
body = "arm"
axis = [0.0, 1.0, 0.0]
[[outputs]]
name = "lift_length"
type = "element_length"
force = "lift"
[[outputs]]
name = "lift_force"
type = "element_force"
force = "lift"
[[outputs]]
name = "bob_force"
type = "element_force"
force = "bob_spring"
[[outputs]]
name = "bob_length"
type = "element_length"
force = "bob_spring"
[[outputs]]
name = "bob_acc"
type = "acceleration"
body = "bob"
component = "z"
[[outputs]]
name = "slide_reaction"
type = "joint_force"
joint = "slide"
component = "x"
[[outputs]]
name = "turn_torque"
type = "driver_force"
driver = "turn_drive"
[[outputs]]
name = "energy"
type = "energy"
"#;
