//! The `agentic` binary as the tests drive it (tests/process/, tests/server_cluster.rs, tests/server_faults.rs,
//! tests/it/): [`Cli`] runs one command to its end, [`Serve`] starts `agentic serve` as a child process
//! ([`Served`], killed when dropped).
//!
//! Both clear the variables of the developer's environment that change what the binary does — the log filter,
//! the store, the server and its token, the test crash point — unless a test sets them again. Each test binary
//! includes this file as a module (`#[path = "../support/binary.rs"] mod binary;`) and uses part of it.

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agentic");

/// The variables cleared in every child: set in a developer's shell, they would change what the tests see.
const CLEARED: [&str; 5] =
    ["AGENTIC_LOG", "AGENTIC_STORE", "AGENTIC_SERVER", "AGENTIC_TOKEN", "AGENTIC_TEST_KILL_AFTER_STEP"];

/// How long `agentic serve` may take to announce its address.
const SERVE_START: Duration = Duration::from_secs(30);

/// The binary with `args`, and [`CLEARED`] removed from its environment.
fn command<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(BIN);
    command.args(args);
    for name in CLEARED {
        command.env_remove(name);
    }
    command
}

// ---------------------------------------------------------------------------------------------------------
// One command

/// One `agentic` command, run to its end with [`Cli::output`] (or started with [`Cli::spawn`]).
pub struct Cli(Command);

impl Cli {
    /// `agentic ARGS..` with none of [`CLEARED`] set.
    pub fn new<I, S>(args: I) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Cli(command(args))
    }

    /// On the store `store` (`AGENTIC_STORE`: a directory or a PostgreSQL URL).
    pub fn store(self, store: impl AsRef<OsStr>) -> Cli {
        self.env("AGENTIC_STORE", store)
    }

    /// Killed by the test crash point after step `k` (`AGENTIC_TEST_KILL_AFTER_STEP`) when given.
    pub fn kill_after(self, k: Option<u64>) -> Cli {
        match k {
            Some(k) => self.env("AGENTIC_TEST_KILL_AFTER_STEP", k.to_string()),
            None => self,
        }
    }

    /// With the variable `name` set to `value`.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cli {
        self.0.env(name, value);
        self
    }

    /// Without the variable `name`.
    pub fn env_remove(mut self, name: impl AsRef<OsStr>) -> Cli {
        self.0.env_remove(name);
        self
    }

    /// In the working directory `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cli {
        self.0.current_dir(dir);
        self
    }

    /// Runs the command to its end: its exit status, standard output and standard error.
    pub fn output(mut self) -> Output {
        self.0.output().expect("the binary runs")
    }

    /// Runs the command to its end off the test's runtime (which may serve the model the command calls).
    pub async fn output_async(self) -> Output {
        tokio::task::spawn_blocking(move || self.output()).await.expect("the command's thread")
    }

    /// Runs the command to its end with `input` on its standard input.
    pub fn output_with_stdin(mut self, input: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .0
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        child.stdin.take().expect("piped stdin").write_all(input).expect("stdin written");
        child.wait_with_output().expect("the binary runs")
    }

    /// Starts the command with its standard output and error piped, for a test that signals it.
    pub fn spawn(mut self) -> Child {
        self.0.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the binary starts")
    }
}

/// Runs `agentic ARGS..` on the store `store` (`AGENTIC_STORE`) to its end.
pub fn agentic(store: impl AsRef<OsStr>, args: &[&str]) -> Output {
    Cli::new(args).store(store).output()
}

/// A command's standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

// ---------------------------------------------------------------------------------------------------------
// A server

/// How to start `agentic serve`: its store, specs, address, arguments and environment. [`Serve::start`] starts
/// it and waits until it listens.
pub struct Serve {
    command: Command,
    store: Option<OsString>,
    specs: Vec<(String, String)>,
    host: String,
    echo: Option<String>,
}

impl Serve {
    /// A server on the store `store` (a directory or a PostgreSQL URL).
    pub fn on(store: impl AsRef<OsStr>) -> Serve {
        let mut serve = Serve::fresh();
        serve.store = Some(store.as_ref().to_os_string());
        serve
    }

    /// A server on a fresh store in a temporary directory (removed when the server is dropped).
    pub fn fresh() -> Serve {
        Serve { command: command(["serve"]), store: None, specs: Vec::new(), host: "127.0.0.1".into(), echo: None }
    }

    /// With the specs of the directory `dir` (`--specs`).
    pub fn specs_dir(mut self, dir: impl AsRef<OsStr>) -> Serve {
        self.command.arg("--specs").arg(dir);
        self
    }

    /// With the specs `(file name, text)` as the files of a fresh `--specs` directory (in a temporary
    /// directory, removed when the server is dropped).
    pub fn specs(mut self, specs: &[(&str, &str)]) -> Serve {
        self.specs.extend(specs.iter().map(|(file, text)| (file.to_string(), text.to_string())));
        self
    }

    /// Listening on `host` (a free port; `127.0.0.1` unless given).
    pub fn host(mut self, host: &str) -> Serve {
        self.host = host.to_string();
        self
    }

    /// With the argument `arg` (`--lease-ms`, `1500`).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Serve {
        self.command.arg(arg);
        self
    }

    /// With the variable `name` set to `value` (`OPENAI_API_KEY`, `AGENTIC_LOG`).
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Serve {
        self.command.env(name, value);
        self
    }

    /// Requiring the token `token` (`AGENTIC_TOKEN`) when given.
    pub fn token(self, token: Option<&str>) -> Serve {
        match token {
            Some(token) => self.env("AGENTIC_TOKEN", token),
            None => self,
        }
    }

    /// Printing the server's standard error to the test's, each line after `[server LABEL]` (`[server]` when
    /// `label` is empty).
    pub fn echo_stderr(mut self, label: &str) -> Serve {
        self.echo = Some(label.to_string());
        self
    }

    /// Starts the server and waits until it listens: until it prints `agentic serve: URL …` on its standard
    /// error (after it bound its port and advertised itself in the store's `server.json`). Fails when it ends
    /// before or takes longer than 30 s, with what it printed.
    pub fn start(self) -> Served {
        let Serve { mut command, store, specs, host, echo } = self;
        let dir = (store.is_none() || !specs.is_empty()).then(|| tempfile::tempdir().expect("tempdir"));
        let store = match (store, &dir) {
            (Some(store), _) => store,
            (None, Some(dir)) => dir.path().join("store").into_os_string(),
            (None, None) => unreachable!("a temporary directory when no store is given"),
        };
        if let Some(dir) = dir.as_ref().filter(|_| !specs.is_empty()) {
            let spec_dir = dir.path().join("specs");
            std::fs::create_dir(&spec_dir).expect("specs dir");
            for (file, text) in &specs {
                std::fs::write(spec_dir.join(file), text).expect("spec file");
            }
            command.arg("--specs").arg(spec_dir);
        }
        command.arg("--store").arg(&store).arg("--listen").arg(format!("{host}:0"));
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn agentic serve");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (announced, url) = mpsc::channel();
        let err = BufReader::new(child.stderr.take().expect("piped stderr"));
        let seen = lines.clone();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                match echo.as_deref() {
                    Some("") => eprintln!("[server] {line}"),
                    Some(label) => eprintln!("[server {label}] {line}"),
                    None => {}
                }
                // `agentic serve: http://127.0.0.1:PORT (store …); stop with …`
                if let Some(rest) = line.strip_prefix("agentic serve: ") {
                    let _ = announced.send(rest.split(' ').next().unwrap_or_default().to_string());
                }
                seen.lock().expect("stderr lines").push(line);
            }
        });
        let url = match url.recv_timeout(SERVE_START) {
            Ok(url) => url,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                let printed = lines.lock().expect("stderr lines").join("\n");
                panic!("agentic serve did not start ({e}; {status:?}):\n{printed}");
            }
        };
        // A server on every address (`0.0.0.0`) is reached on loopback.
        let url = url.replace("://0.0.0.0:", "://127.0.0.1:");
        Served { child, url, stderr: lines, store: PathBuf::from(store), _dir: dir }
    }
}

/// A running `agentic serve`, killed (SIGKILL, after a SIGCONT if it was stopped) when dropped.
pub struct Served {
    child: Child,
    /// Its base URL: `http://127.0.0.1:PORT`.
    pub url: String,
    stderr: Arc<Mutex<Vec<String>>>,
    /// Its store (a directory or a PostgreSQL URL).
    pub store: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Served {
    /// The lines it printed on its standard error so far; the list grows while it runs.
    pub fn stderr_lines(&self) -> Arc<Mutex<Vec<String>>> {
        self.stderr.clone()
    }

    /// Sends `signal` (`STOP`, `CONT`, `TERM`) to the server.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").arg(format!("-{signal}")).arg(&pid).status().expect("kill runs");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// SIGTERM, and waits for the server to end; its exit code.
    pub fn term(mut self) -> Option<i32> {
        self.signal("TERM");
        self.child.wait().expect("wait for the server").code()
    }

    /// SIGKILL, and waits for the server to end.
    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("wait for the server");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
