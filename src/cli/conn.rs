//! Where the server is: the `--server` flag every client command takes (and kubectl's global
//! one before the command), resolved with `MCO_SERVER` and the kubeconfig ([`Conn::url`]).

use crate::cli;

/// `--server` given before the command (kubectl's global flag); set once in `main`.
pub static GLOBAL_SERVER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Where the server is: every client command takes it.
#[derive(clap::Args, Clone)]
pub struct Conn {
    /// Address of the mco server (`host:port` or `http://host:port`; default from MCO_SERVER,
    /// else the kubeconfig's current context, else 127.0.0.1:7443). A comma-separated list
    /// names several servers on one etcd: a request whose connection one refuses goes to the
    /// next (for up to 15 s while a standby takes over). Also accepted before the command.
    #[arg(long, value_name = "ADDRESS")]
    pub server: Option<String>,
}

impl Conn {
    /// The flag after the command, else the one before it, else `MCO_SERVER`, else the
    /// kubeconfig's current context's server, else the default (`cli::credentials`).
    pub fn url(&self) -> String {
        let env = std::env::var("MCO_SERVER").ok().filter(|s| !s.is_empty());
        let global = GLOBAL_SERVER.get().cloned().flatten();
        cli::server_url(self.server.clone().or(global).or(env).as_deref())
    }
}
