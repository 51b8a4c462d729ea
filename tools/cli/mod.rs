//! Subcommands of the `mbsfmu` tool.

pub mod check;
pub mod csv;
pub mod export;
pub mod info;
pub mod plot;
pub mod simulate;

use mbsfmu::mbs::ModelError;

/// What went wrong, split by who can fix it.
#[derive(Debug)]
pub enum CliError {
    /// The user's arguments, model or files (exit code 1).
    User(String),
    /// A bug or an unfinished part of mbsfmu (exit code 2).
    Internal(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::User(_) => 1,
            CliError::Internal(_) => 2,
        }
    }
}

impl From<ModelError> for CliError {
    fn from(e: ModelError) -> Self {
        CliError::User(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;
