//! The real `kubectl` (client-go inside) as a test client of an API server or
//! of sitegrid-proxy. Each [`Kubectl`] has a private HOME, cache directory and
//! an empty kubeconfig, so a test never reads or writes the user's. A missing
//! kubectl is a failure with a clear message, never a silent skip: these
//! tests exist to prove a real client works.

use std::{
    ffi::OsString,
    io::Write as _,
    path::PathBuf,
    process::{Command, Output, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

/// Names each test home apart within one test process.
static NEXT_HOME: AtomicUsize = AtomicUsize::new(0);

/// The kubectl binary: `$KUBECTL` if set, else `kubectl` on `PATH`.
pub fn binary() -> OsString {
    std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into())
}

/// Where the Google Cloud SDK keeps its kubectls, one per release
/// (`kubectl.1.33`); `.ci/run` looks there for `kubectl` too.
const CLOUD_SDK_BIN: &str = "/usr/lib/google-cloud-sdk/bin";

/// The kubectl of one release (`"1.33"`), for tests that need that client:
/// `$KUBECTL_1_33` if set, else `kubectl.1.33` on `PATH`, else the Google
/// Cloud SDK's. `Err` says where it looked.
pub fn release_binary(release: &str) -> Result<PathBuf, String> {
    let var = format!("KUBECTL_{}", release.replace('.', "_"));
    if let Some(path) = std::env::var_os(&var) {
        return Ok(PathBuf::from(path));
    }
    let name = format!("kubectl.{release}");
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from(CLOUD_SDK_BIN)])
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "no kubectl {release}: set ${var} to one, or put {name} on PATH \
                 (the Google Cloud SDK ships it in {CLOUD_SDK_BIN})"
            )
        })
}

/// kubectl talking to one server (clones share the HOME).
#[derive(Debug, Clone)]
pub struct Kubectl {
    binary: OsString,
    /// How to provide `binary` when it cannot be run.
    missing: String,
    server: String,
    home: Arc<Home>,
    flags: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

/// A private HOME, removed with the last [`Kubectl`] that uses it.
#[derive(Debug)]
struct Home(PathBuf);

impl Drop for Home {
    fn drop(&mut self) {
        // Best effort: a leftover temp directory is harmless.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a kubectl run printed.
#[derive(Debug, Clone)]
pub struct Printed {
    /// Whether kubectl exited with 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Printed {
    /// The standard output of a run of `args` that must have succeeded.
    fn stdout_of_success(self, args: &[&str]) -> String {
        assert!(
            self.success,
            "kubectl {} failed: {}\n{}",
            args.join(" "),
            self.stderr,
            self.stdout
        );
        self.stdout
    }
}

impl Kubectl {
    /// kubectl for `server` (`http://127.0.0.1:…` or `https://…`).
    pub fn new(server: impl Into<String>) -> Kubectl {
        let home = std::env::temp_dir().join(format!(
            "sitegrid-kubectl-{}-{}",
            std::process::id(),
            NEXT_HOME.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::create_dir_all(&home) {
            panic!("cannot make a HOME for kubectl at {}: {e}", home.display());
        }
        Kubectl {
            binary: binary(),
            missing: "install kubectl (.ci/run finds or installs one) or set $KUBECTL to its path"
                .into(),
            server: server.into(),
            home: Arc::new(Home(home)),
            flags: Vec::new(),
            env: Vec::new(),
        }
    }

    /// The kubectl of `release` ([`release_binary`]) for `server`.
    ///
    /// # Panics
    ///
    /// If that kubectl is not found, saying where it was looked for.
    pub fn of_release(server: impl Into<String>, release: &str) -> Kubectl {
        match release_binary(release) {
            Ok(path) => Kubectl {
                binary: path.into_os_string(),
                missing: format!(
                    "a kubectl {release}: set $KUBECTL_{} to one",
                    release.replace('.', "_")
                ),
                ..Kubectl::new(server)
            },
            Err(why) => panic!("this test uses the real kubectl {release} as its client: {why}"),
        }
    }

    /// Adds global flags (credentials, timeouts) to every run.
    pub fn with_flags<I, S>(mut self, flags: I) -> Kubectl
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.flags.extend(flags.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for every run (client-go's
    /// `KUBE_FEATURE_<gate>` toggles, say).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Kubectl {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `kubectl <args>` (with `stdin` fed to it) and returns what it printed.
    ///
    /// # Panics
    ///
    /// If kubectl cannot be started at all: install it, or set `$KUBECTL`.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Printed {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--server")
            .arg(&self.server)
            .arg("--cache-dir")
            .arg(self.home.0.join("cache"))
            .args(&self.flags)
            .args(args)
            .env("HOME", &self.home.0)
            .env("KUBECONFIG", self.home.0.join("kubeconfig"))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let output = cmd.spawn().and_then(|mut child| {
            if let Some(mut pipe) = child.stdin.take() {
                pipe.write_all(stdin.as_bytes())?;
            }
            child.wait_with_output()
        });
        match output {
            Ok(Output {
                status,
                stdout,
                stderr,
            }) => Printed {
                success: status.success(),
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            },
            Err(e) => panic!(
                "cannot run {:?} ({e}): this test uses the real kubectl as its client; {}",
                self.binary, self.missing
            ),
        }
    }

    /// Runs `kubectl <args>` and returns what it printed.
    pub fn run(&self, args: &[&str]) -> Printed {
        self.run_with_stdin(args, "")
    }

    /// Runs `kubectl <args>`, which must succeed; returns its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args).stdout_of_success(args)
    }

    /// [`Kubectl::run_with_stdin`] off the async runtime's threads (kubectl
    /// blocks, and the server it talks to may run on this runtime).
    pub async fn run_async(&self, args: &[&str], stdin: &str) -> Printed {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let (me, stdin) = (self.clone(), stdin.to_owned());
        let run = move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            me.run_with_stdin(&args, &stdin)
        };
        match tokio::task::spawn_blocking(run).await {
            Ok(printed) => printed,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// [`Kubectl::ok`] off the async runtime's threads.
    pub async fn ok_async(&self, args: &[&str]) -> String {
        self.run_async(args, "").await.stdout_of_success(args)
    }
}
