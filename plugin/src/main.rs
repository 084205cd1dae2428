//! `kubectl-sitegrid`: kubectl runs it for `kubectl sitegrid …` when it is on
//! PATH. Flags → one read-only command → its output, or one error line and
//! exit status 1.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;
use sitegrid_plugin::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(sitegrid_plugin::run(&cli)) {
        Ok(printed) => {
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = std::io::stdout().write_all(printed.stdout.as_bytes());
            let _ = std::io::stderr().write_all(printed.stderr.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
