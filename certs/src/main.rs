//! `sitegrid-certs`: the command line over [`sitegrid_certs::Pki`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sitegrid_certs::{KeyMaterial, Pki, MAX_DAYS};

/// sitegrid-certs: the certificates kube-proxy and sitegrid-proxy talk over
/// HTTPS with — a CA, the proxy's serving certificate, client certificates
/// (the user is the CN, the group the O value, as Kubernetes reads them)
/// and a kubeconfig for kube-proxy.
///
/// A typical set, for the Secrets of deploy/:
///
///   sitegrid-certs init
///   sitegrid-certs server
///   sitegrid-certs client kube-proxy --user system:kube-proxy
///   sitegrid-certs kubeconfig kube-proxy
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-certs",
    version,
    about,
    long_about,
    verbatim_doc_comment
)]
struct Cli {
    /// Directory the files are read from and written to (created if missing).
    #[arg(long, global = true, default_value = "sitegrid-certs")]
    out: PathBuf,
    /// Replace files that already exist (by default a command that would
    /// replace one writes nothing and fails).
    #[arg(long, global = true)]
    force: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A new CA: ca.crt and ca.key.
    Init {
        /// The CA's common name.
        #[arg(long, default_value = "sitegrid CA")]
        name: String,
        /// Days the CA is valid.
        #[arg(long, default_value_t = 3650, value_parser = days)]
        days: u32,
    },
    /// The proxy's serving certificate, signed by the CA: server.crt and
    /// server.key, for 127.0.0.1, ::1 and localhost plus --dns and --ip.
    Server {
        /// The certificate's common name.
        #[arg(long, default_value = "sitegrid-proxy")]
        name: String,
        /// Another DNS name the proxy is reached by (repeatable).
        #[arg(long)]
        dns: Vec<String>,
        /// Another IP address the proxy is reached by (repeatable).
        #[arg(long)]
        ip: Vec<IpAddr>,
        /// Days the certificate is valid (never past the CA's end).
        #[arg(long, default_value_t = 365, value_parser = days)]
        days: u32,
    },
    /// A client certificate signed by the CA: NAME.crt and NAME.key.
    Client {
        /// File name (NAME.crt, NAME.key) and, without --user, the user.
        name: String,
        /// The user (CN) if not NAME, e.g. system:kube-proxy.
        #[arg(long)]
        user: Option<String>,
        /// The user's group (O), e.g. system:nodes; one at most.
        #[arg(long)]
        group: Vec<String>,
        /// Days the certificate is valid (never past the CA's end).
        #[arg(long, default_value_t = 365, value_parser = days)]
        days: u32,
    },
    /// NAME.kubeconfig: reaches the proxy at --server with NAME's client
    /// certificate, trusting the CA.
    Kubeconfig {
        /// The client whose NAME.crt and NAME.key it uses.
        #[arg(default_value = "kube-proxy")]
        name: String,
        /// The proxy's URL.
        #[arg(long, default_value = "https://127.0.0.1:51006")]
        server: String,
        /// Name the certificates as files in this directory (ca.crt,
        /// tls.crt, tls.key: a kubernetes.io/tls Secret with ca.crt mounted
        /// there) instead of embedding them.
        #[arg(long)]
        cert_dir: Option<PathBuf>,
    },
}

fn days(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(d) if (1..=MAX_DAYS).contains(&d) => Ok(d),
        _ => Err(format!(
            "must be a whole number of days from 1 to {MAX_DAYS}"
        )),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let pki = Pki::new(&cli.out, cli.force);
    let result = match &cli.command {
        Command::Init { name, days } => pki.init(name, *days),
        Command::Server {
            name,
            dns,
            ip,
            days,
        } => pki.server(name, dns, ip, *days),
        Command::Client {
            name,
            user,
            group,
            days,
        } => pki.client(name, user.as_deref(), group, *days),
        Command::Kubeconfig {
            name,
            server,
            cert_dir,
        } => {
            let material = match cert_dir {
                Some(dir) => KeyMaterial::Files(dir.clone()),
                None => KeyMaterial::Embedded,
            };
            pki.kubeconfig(name, server, &material)
        }
    };
    match result {
        Ok(written) => {
            for w in written {
                println!("{w}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("sitegrid-certs: {err}");
            ExitCode::FAILURE
        }
    }
}
