//! The multibody problem: model file, resolved model, kinematics, forces, constraints,
//! assembly. Knows nothing of integrators or FMI (it implements the traits of
//! `integrate::system`, which are plain equations).

pub mod assembly;
pub mod contact_friction;
pub mod curves;
pub mod error;
pub mod expr;
pub mod friction;
pub mod inputs;
pub mod joint;
pub mod kin;
pub mod loader;
pub mod math;
pub mod model_file;
pub mod motion;
pub mod resolved;
pub mod singular;
pub mod spec;
pub mod statics;
pub mod stops;
pub mod system;
pub mod table;
pub mod tire;

pub use error::ModelError;
pub use loader::{
    load_model, load_model_general, load_model_str, load_model_with_parameters, resolve_again,
};
pub use spec::ModelSpec;
