//! The model file reader (TOML → [`ModelSpec`]). See docs/model-format.md.

use super::{ModelError, ModelSpec};
use std::path::Path;

/// Read and validate a model file.
pub fn load_model(path: &Path) -> Result<ModelSpec, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::Io { file: path.to_path_buf(), reason: e.to_string() })?;
    load_model_str(&text, path)
}

/// Parse model text; `path` names the file in messages and locates referenced files (CSV tables).
pub fn load_model_str(_text: &str, path: &Path) -> Result<ModelSpec, ModelError> {
    Err(ModelError::Io { file: path.to_path_buf(), reason: "the model reader is not written yet".into() })
}
