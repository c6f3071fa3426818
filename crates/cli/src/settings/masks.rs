//! The read masks of a command's calls and probes: the registry's [`ReadMasks`] from the
//! resolved settings (issue 23; docs/security.md, "Read masks").
//!
//! The credential masks cover every home a tool could read (unless `[sandbox] profile =
//! "compat"`); toolsmith's own state is hidden whatever the profile: the trust store's and
//! the cache's directories (made, mode 0700, before the first call, so that a tool cannot
//! create them where they were missing), the user and project config files, the audit log,
//! every tools directory's history, each `[secrets.NAME] file`, and (added by `serve`) the
//! token and TLS files.

use std::path::{Path, PathBuf};

use anyhow::bail;
use toolsmith_registry::{
    GENERATED_HISTORY_DIR, ReadMasks, SandboxProfile, SecretSource, credential_paths, homes,
    reveals_own_state,
};

use crate::settings::options::SandboxOptions;
use crate::settings::resolve::GlobalSettings;

/// `list` with `~/` expanded against `home` and relative paths made absolute against `cwd`.
pub(crate) fn expand(list: &[String], home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    list.iter()
        .filter_map(|text| match (text.strip_prefix("~/"), text == "~") {
            (_, true) => home.map(Path::to_path_buf),
            (Some(rest), _) => home.map(|home| home.join(rest)),
            (None, _) => Some(cwd.join(text)),
        })
        .collect()
}

impl GlobalSettings {
    /// The masks of every call and probe of this command (see the module's documentation).
    pub(super) fn resolve_read_masks(&self, sandbox: &SandboxOptions) -> ReadMasks {
        let home = self.home.as_deref();
        let hide = sandbox.read_hide.as_deref().unwrap_or_default();
        let reveal = sandbox.read_reveal.as_deref().unwrap_or_default();
        ReadMasks {
            credentials: if sandbox.profile == Some(SandboxProfile::Compat) {
                Vec::new()
            } else {
                credential_paths(&homes(&self.home.iter().cloned().collect::<Vec<_>>()))
            },
            own_state: self.own_state_masks(),
            hide: expand(hide, home, &self.cwd),
            reveal: expand(reveal, home, &self.cwd),
        }
    }

    /// toolsmith's own state, as hidden from tools.
    fn own_state_masks(&self) -> Vec<PathBuf> {
        let user_config = self
            .user_dir
            .as_ref()
            .map(|user_dir| user_dir.join("config.toml"));
        let histories = self
            .layers
            .iter()
            .map(|layer| layer.dir.as_path())
            .chain([self.generator_tools_dir.as_path()])
            .map(|dir| dir.join(GENERATED_HISTORY_DIR));
        // A `[secrets.NAME] file` is read by toolsmith for the tools granted it, never by a tool.
        let secret_files = self
            .secrets
            .defined()
            .values()
            .filter_map(|source| match source {
                SecretSource::File(path) => Some(path.clone()),
                _ => None,
            })
            .collect::<Vec<_>>();
        // Absolute, as the executor hides only absolute paths: a project named `.` is relative.
        let absolute = |path: PathBuf| {
            let joined = self.cwd.join(path);
            std::path::absolute(&joined).unwrap_or(joined)
        };
        self.state_dirs()
            .into_iter()
            .chain(user_config)
            .chain(self.user_config_file.clone())
            .chain(self.config_file.clone())
            .chain([self.project_dir.join(".toolsmith").join("config.toml")])
            .chain(self.audit_path.clone())
            .chain(histories)
            .chain(secret_files)
            .map(absolute)
            .collect()
    }

    /// The directories of toolsmith's state hidden whole: the trust store's and the caches'.
    fn state_dirs(&self) -> Vec<PathBuf> {
        self.state_dirs.clone()
    }

    /// Makes the state directories (mode 0700) where missing, so that they are hidden from
    /// the first call on and no tool can plant them (a failure is left to the first write).
    pub(crate) fn make_state_dirs(&self) {
        use std::os::unix::fs::DirBuilderExt;
        for dir in self.state_dirs() {
            if let Err(error) = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
            {
                tracing::debug!(dir = %dir.display(), %error, "could not make a state directory");
            }
        }
    }

    /// Refuses a `read_reveal` (of `[sandbox]` or any `[tools.NAME]`) that would reveal
    /// toolsmith's own state.
    pub(crate) fn check_read_reveal(&self) -> anyhow::Result<()> {
        let own_state = self.own_state_masks();
        let tools = self.tools.iter().flat_map(|(name, tool)| {
            let reveal = tool.sandbox.read_reveal.as_deref().unwrap_or_default();
            expand(reveal, self.home.as_deref(), &self.cwd)
                .into_iter()
                .map(move |path| (format!("tools.{name}.read_reveal"), path))
        });
        let global = self
            .read_masks
            .reveal
            .iter()
            .map(|path| ("sandbox.read_reveal".to_owned(), path.clone()));
        for (key, path) in global.chain(tools) {
            if let Some(state) = reveals_own_state(&path, &own_state) {
                bail!(
                    "{key} = [{:?}] would reveal toolsmith's own state ({}): it is hidden from every tool under every profile",
                    path.display().to_string(),
                    state.display()
                );
            }
        }
        Ok(())
    }
}
