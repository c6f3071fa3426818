//! Read masks of tool calls and probes: the paths a tool must not see, under every profile
//! (`full` included), which the executor hides in the call's mount namespace
//! ([`Sandbox::hidden`](toolsmith_executor::Sandbox::hidden)).
//!
//! Two kinds, kept apart because only one may be taken out:
//! - the credential locations of every home a tool could read ([`CREDENTIALS`] below each of
//!   [`homes`]), plus the operator's `read_hide`; `read_reveal` takes paths out of them, and
//!   `[sandbox] profile = "compat"` turns the credential masks off;
//! - toolsmith's own state (configs, trust store, caches, audit log, token and key files,
//!   history): hidden always, never revealed.
//!
//! A tool's declaration may add `read_hide` paths (it narrows); a `read_reveal` it declares
//! must be within what the operator reveals for it, or the call is `POLICY_DENIED` naming the
//! key to add.

use std::path::{Path, PathBuf};

/// Where credentials live below a home directory.
pub(crate) const CREDENTIALS: [&str; 13] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// Every home directory a tool could read: each `/etc/passwd` entry's home, `/root`, each
/// directory of `/home`, and `extra` (toolsmith's own `$HOME`), those that exist, but `/`.
pub fn homes(extra: &[PathBuf]) -> Vec<PathBuf> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let from_passwd = passwd
        .lines()
        .filter_map(|line| line.split(':').nth(5))
        .map(PathBuf::from);
    let under_home = std::fs::read_dir("/home")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path());
    let mut homes: Vec<PathBuf> = Vec::new();
    for home in from_passwd
        .chain([PathBuf::from("/root")])
        .chain(under_home)
        .chain(extra.iter().cloned())
    {
        let usable = home.is_absolute() && home != Path::new("/") && home.is_dir();
        if usable && !homes.contains(&home) {
            homes.push(home);
        }
    }
    homes
}

/// `CREDENTIALS` below each of `homes`.
pub fn credential_paths(homes: &[PathBuf]) -> Vec<PathBuf> {
    homes
        .iter()
        .flat_map(|home| CREDENTIALS.iter().map(move |path| home.join(path)))
        .collect()
}

/// The operator's read masks (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMasks {
    /// The credential locations of every home; empty under `profile = "compat"`.
    pub credentials: Vec<PathBuf>,
    /// toolsmith's own state, hidden whatever is revealed.
    pub own_state: Vec<PathBuf>,
    /// `[sandbox] read_hide`.
    pub hide: Vec<PathBuf>,
    /// `[sandbox] read_reveal`.
    pub reveal: Vec<PathBuf>,
}

/// A tool declares `read_reveal` of a path the operator did not reveal for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "it declares read_reveal of {}, which the operator does not grant (add it to `[tools.{tool}] read_reveal`)",
    path.display()
)]
pub struct RevealDenied {
    /// The tool's name.
    pub tool: String,
    /// The path declared.
    pub path: PathBuf,
}

impl ReadMasks {
    /// No mask at all (a library user's default, the generator's own tests).
    pub fn none() -> ReadMasks {
        ReadMasks::default()
    }

    /// What every probe hides: the operator's masks, with no tool's word.
    pub fn for_probes(&self) -> Vec<PathBuf> {
        self.effective(&[], &[])
    }

    /// What a call of `tool` hides: the operator's masks and `tool_hide` (`[tools.NAME]
    /// read_hide`) and `declared_hide` (the tool's own), without what `tool_reveal` and
    /// `[sandbox] read_reveal` reveal, toolsmith's own state always. A `declared_reveal` path
    /// outside what the operator reveals is refused.
    pub fn for_call(
        &self,
        tool: &str,
        tool_hide: &[PathBuf],
        tool_reveal: &[PathBuf],
        declared_hide: &[PathBuf],
        declared_reveal: &[PathBuf],
    ) -> Result<Vec<PathBuf>, RevealDenied> {
        let granted = |path: &Path| {
            self.reveal
                .iter()
                .chain(tool_reveal)
                .any(|reveal| path.starts_with(reveal))
        };
        if let Some(path) = declared_reveal.iter().find(|path| !granted(path)) {
            return Err(RevealDenied {
                tool: tool.to_owned(),
                path: path.clone(),
            });
        }
        let hide: Vec<PathBuf> = tool_hide.iter().chain(declared_hide).cloned().collect();
        Ok(self.effective(&hide, tool_reveal))
    }

    fn effective(&self, hide: &[PathBuf], reveal: &[PathBuf]) -> Vec<PathBuf> {
        let revealed = |path: &Path| {
            self.reveal
                .iter()
                .chain(reveal)
                .any(|reveal| path.starts_with(reveal))
        };
        let mut paths: Vec<PathBuf> = self
            .credentials
            .iter()
            .chain(&self.hide)
            .chain(hide)
            .filter(|path| !revealed(path))
            .cloned()
            .collect();
        paths.extend(self.own_state.iter().cloned());
        paths.sort();
        paths.dedup();
        paths
    }
}

/// Why a `read_reveal` path of the operator's is refused: it is (or holds, or lies in)
/// toolsmith's own state, which no tool may read.
pub fn reveals_own_state<'state>(
    reveal: &Path,
    own_state: &'state [PathBuf],
) -> Option<&'state Path> {
    own_state
        .iter()
        .find(|state| state.starts_with(reveal) || reveal.starts_with(state))
        .map(PathBuf::as_path)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::masks::{ReadMasks, reveals_own_state};

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    fn masks() -> ReadMasks {
        ReadMasks {
            credentials: paths(&["/root/.ssh", "/root/.aws", "/home/a/.ssh"]),
            own_state: paths(&["/root/.local/state/toolsmith"]),
            hide: paths(&["/srv/secrets"]),
            reveal: paths(&["/home/a"]),
        }
    }

    #[test]
    fn operator_reveal_takes_out_and_own_state_stays() {
        assert_eq!(
            masks().for_probes(),
            paths(&[
                "/root/.aws",
                "/root/.local/state/toolsmith",
                "/root/.ssh",
                "/srv/secrets"
            ])
        );
        let call = masks()
            .for_call(
                "t",
                &paths(&["/opt/x"]),
                &paths(&["/root/.aws", "/root/.local"]),
                &[],
                &[],
            )
            .unwrap();
        assert_eq!(
            call,
            paths(&[
                "/opt/x",
                "/root/.local/state/toolsmith",
                "/root/.ssh",
                "/srv/secrets"
            ])
        );
    }

    #[test]
    fn a_declaration_narrows_and_cannot_reveal_beyond_the_operator() {
        let call = masks()
            .for_call("t", &[], &[], &paths(&["/data"]), &paths(&["/home/a/.ssh"]))
            .unwrap();
        assert!(call.contains(&PathBuf::from("/data")));
        let denied = masks()
            .for_call("t", &[], &[], &[], &paths(&["/root/.ssh"]))
            .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "it declares read_reveal of /root/.ssh, which the operator does not grant (add it to `[tools.t] read_reveal`)"
        );
    }

    #[test]
    fn own_state_cannot_be_revealed() {
        let state = paths(&["/root/.local/state/toolsmith"]);
        assert!(reveals_own_state(&PathBuf::from("/root"), &state).is_some());
        assert!(
            reveals_own_state(&PathBuf::from("/root/.local/state/toolsmith/trust"), &state)
                .is_some()
        );
        assert!(reveals_own_state(&PathBuf::from("/root/.ssh"), &state).is_none());
    }
}
