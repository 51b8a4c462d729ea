//! Subcommands of the `mbsfmu` tool.

/// `print!` that does not panic when stdout is closed (`mbsfmu check m.toml | head -1`): the
/// report is for a reader who left; the work (an FMU written, a result CSV) stands.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!` that does not panic when stdout is closed (see [`out!`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

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
