//! A `hippocamp serve` child on a data directory of its own, on loopback,
//! and the tokens its clients use: what the tests of the Python and
//! TypeScript packages drive.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::missing_panics_doc
)]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The binary under test.
pub fn hippocamp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hippocamp"))
}

/// A token of `app` (every user) with every memory and artifact
/// permission, made in `data` before the server starts (it reads the file
/// it finds at start and watches it after).
pub fn token(data: &Path, app: &str) -> String {
    let out = hippocamp()
        .args(["token", "--data-dir"])
        .arg(data)
        .args(["create", "--app", app, "--permissions"])
        .arg(
            "memory:read,memory:write,memory:erase,artifacts:read,artifacts:write,artifacts:delete",
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["token"].as_str().unwrap().to_owned()
}

/// A running server; killed when dropped.
pub struct Server {
    child: Child,
    /// `HOST:PORT`.
    pub addr: String,
}

/// Starts `hippocamp serve` on `data`, on a free loopback port.
pub fn serve(data: &Path) -> Server {
    let mut child = hippocamp()
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first.rsplit("http://").next().unwrap().to_owned();
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
