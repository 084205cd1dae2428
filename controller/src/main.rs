//! `sitegrid-controller`: the command line of the grid controller.
//!
//! Only `crds` exists so far; the reconciler is future work.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The SuperEdge grid controller (DeploymentGrid, StatefulSetGrid, ServiceGrid).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions as multi-document YAML (for `kubectl apply -f -`).
    Crds {
        /// Instead of printing, write one `<group>_<plural>.yaml` per CRD into this
        /// directory (how `deploy/crds/` is regenerated).
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds { out_dir: None } => print_crds(),
        Command::Crds { out_dir: Some(dir) } => write_crds(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let mut line = format!("sitegrid-controller: {err}");
            let mut source = std::error::Error::source(&*err);
            while let Some(cause) = source {
                line.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{line}");
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> Result<(), Box<dyn std::error::Error>> {
    let yaml = sitegrid_controller::crds::all_yaml()?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}

fn write_crds(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    for file in sitegrid_controller::crds::all() {
        let path = dir.join(&file.file_name);
        let yaml = sitegrid_controller::crds::to_yaml(&file.crd)?;
        std::fs::write(&path, yaml).map_err(|err| format!("writing {}: {err}", path.display()))?;
    }
    Ok(())
}
