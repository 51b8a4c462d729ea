//! Errors in model files and in building a model: each names the file, line and column, the
//! element and what is wrong.

use std::path::PathBuf;
use thiserror::Error;

pub use crate::show::show_number;

/// Where in a model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    /// 1-based; 0 when unknown.
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
        } else {
            write!(f, "{}", self.file.display())
        }
    }
}

#[derive(Debug, Clone, Error, PartialEq)]
pub enum ModelError {
    #[error("{file}: cannot read the model file: {reason}")]
    Io { file: PathBuf, reason: String },
    /// TOML syntax, unknown keys, wrong types, missing fields.
    #[error("{at}: {message}")]
    Syntax { at: Location, message: String },
    /// A semantic problem with one element: dangling reference, non-physical value, ...
    #[error("{at}: {element}: {message}")]
    Element {
        at: Location,
        element: String,
        message: String,
    },
    /// A model that loads but cannot be assembled (over/under-determined, no consistent state).
    #[error("{file}: {message}")]
    Assembly { file: PathBuf, message: String },
}
