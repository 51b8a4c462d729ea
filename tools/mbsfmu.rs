//! The `mbsfmu` command line tool: export a model as FMU, check it, simulate it, inspect FMUs.
//!
//! Exit codes: 0 success, 1 user error (bad arguments, model or input files), 2 internal error.

mod cli;

use clap::{Parser, Subcommand};
use cli::CliError;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "mbsfmu",
    version,
    about = "Multibody models as FMI 2.0 / FMI 3.0 Co-Simulation FMUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write FMI 2 and/or FMI 3 Co-Simulation FMUs for a model file.
    Export(cli::export::ExportArgs),
    /// Load a model and report what is wrong with it.
    Check {
        /// The model file (TOML).
        model: PathBuf,
    },
    /// Simulate a model through the co-simulation entry point the FMU uses.
    Simulate(cli::simulate::SimulateArgs),
    /// Show what an FMU contains: version, variables, capabilities, platforms.
    Info {
        /// The .fmu file.
        fmu: PathBuf,
    },
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help / --version print and succeed; argument errors are user errors (1).
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let result = match cli.command {
        Command::Export(a) => cli::export::run(&a),
        Command::Check { model } => cli::check::run(&model),
        Command::Simulate(a) => cli::simulate::run(&a),
        Command::Info { fmu } => cli::info::run(&fmu),
    };
    if let Err(e) = result {
        match &e {
            CliError::User(m) => eprintln!("error: {m}"),
            CliError::Internal(m) => eprintln!("internal error: {m}\n(this is a bug in mbsfmu; please report it with the command you ran)"),
        }
        std::process::exit(e.exit_code());
    }
}
