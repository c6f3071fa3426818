//! The layers tools are discovered in, lowest precedence first, computed from explicit inputs.
//!
//! The order, lowest precedence first (a later directory shadows an earlier one by name):
//!
//! 1. The system layer ([`Layer::System`]): `<prefix>/libexec/toolsmith`, where `<prefix>` is the directory above
//!    the one holding the `toolsmith` binary (`/usr/bin/toolsmith` → `/usr/libexec/toolsmith`).
//! 2. With peers switched on, the peers' user bundles: the `tools/` folder of each Kodelet
//!    plugin (`~/.kodelet/plugins/<org@repo>/tools`) and each Nanocoder skill
//!    (`~/.config/nanocoder/skills/<skill>/tools`) ([`Layer::PeerUserBundles`]).
//! 3. With peers switched on, the peers' user directories: `~/.kodelet/tools`, `~/.ikigai/tools`,
//!    `~/.config/nanocoder/tools` ([`Layer::PeerUser`]).
//! 4. The user layer ([`Layer::User`]): `$TOOLSMITH_HOME/tools`, default `~/.config/toolsmith/tools`.
//! 5. With peers switched on, the peers' project bundles: `<project>/.kodelet/plugins/*/tools`,
//!    `<project>/.nanocoder/skills/*/tools` ([`Layer::PeerProjectBundles`]).
//! 6. With peers switched on, the peers' project directories: `<project>/kodelet-tools` (Kodelet's
//!    earlier folder) then `<project>/.kodelet/tools`, `<project>/.ikigai/tools`,
//!    `<project>/.nanocoder/tools` ([`Layer::PeerProject`]).
//! 7. The project layer ([`Layer::Project`]): `<project>/.toolsmith/tools`.
//! 8. The config layer ([`Layer::Config`]): the directories named by `[discovery] dirs`, in their order.
//!
//! This is each peer's own order: Kodelet reads global plugins, then global tools, then local
//! plugins, then local tools, a later one winning; Nanocoder's project tools win over its
//! personal ones. A bundles directory is one layer directory: discovery reads the `tools/`
//! folder of each bundle in it, in the sorted order of the bundles' names, and the live
//! registry follows bundles as they come and go.
//!
//! A peer's directory sits with the layer of the same scope, below toolsmith's own directory of
//! that scope: a user migrating from Kodelet keeps the precedence they had (project over user),
//! and a tool they rewrite for toolsmith wins over the peer's copy without deleting it.
//!
//! The project is the work tree of the git repository enclosing the current directory (found
//! with `git2`), or the current directory itself outside a repository or in a bare one.
//! Nothing here reads the environment or the process: the CLI passes every input in.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::layer::{BUNDLE_TOOLS_DIR, Layer, Peer};

/// One directory to discover tools in, and its layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerDir {
    /// Where the directory comes from.
    pub layer: Layer,
    /// The directory, absolute.
    pub dir: PathBuf,
}

impl LayerDir {
    /// Each of `dirs` as an [`Layer::Explicit`] directory, in order.
    pub fn explicit(dirs: &[PathBuf]) -> Vec<LayerDir> {
        dirs.iter()
            .map(|dir| LayerDir {
                layer: Layer::Explicit,
                dir: dir.clone(),
            })
            .collect()
    }
}

/// The inputs of [`layer_dirs`], gathered by the caller.
#[derive(Debug, Clone)]
pub struct LayerInputs {
    /// The running `toolsmith` binary, if known; the system layer is found relative to it.
    pub binary: Option<PathBuf>,
    /// `$TOOLSMITH_HOME`, if set: the user layer is its `tools` directory.
    pub toolsmith_home: Option<PathBuf>,
    /// `$HOME`, if set: the default user layer and the peers' user directories are under it.
    pub home: Option<PathBuf>,
    /// The project directory, usually from [`project_dir`].
    pub project: PathBuf,
    /// The directories named in the config file, absolute, in order.
    pub config_dirs: Vec<PathBuf>,
    /// Whether to read the peers' directories too.
    pub peers: bool,
}

/// The tool directories of every layer, lowest precedence first, whether they exist or not
/// (discovery skips missing default directories, and the live registry watches for them).
pub fn layer_dirs(inputs: &LayerInputs) -> Vec<LayerDir> {
    let mut dirs = Vec::new();
    let mut push = |layer: Layer, dir: PathBuf| dirs.push(LayerDir { layer, dir });
    if let Some(binary) = &inputs.binary {
        push(Layer::System, system_dir(binary));
    }
    if inputs.peers
        && let Some(home) = &inputs.home
    {
        for peer in Peer::ALL {
            if let Some(bundles) = peer.user_bundles_dir() {
                push(Layer::PeerUserBundles(peer), home.join(bundles));
            }
        }
        for peer in Peer::ALL {
            push(Layer::PeerUser(peer), home.join(peer.user_dir()));
        }
    }
    let user_home = match (&inputs.toolsmith_home, &inputs.home) {
        (Some(toolsmith_home), _) => Some(toolsmith_home.clone()),
        (None, Some(home)) => Some(home.join(".config").join("toolsmith")),
        (None, None) => None,
    };
    if let Some(user_home) = user_home {
        push(Layer::User, user_home.join("tools"));
    }
    if inputs.peers {
        for peer in Peer::ALL {
            if let Some(bundles) = peer.bundles_dir() {
                push(
                    Layer::PeerProjectBundles(peer),
                    inputs.project.join(bundles),
                );
            }
        }
        for peer in Peer::ALL {
            if let Some(legacy) = peer.legacy_project_tool_dir() {
                push(Layer::PeerProject(peer), inputs.project.join(legacy));
            }
            push(
                Layer::PeerProject(peer),
                inputs.project.join(peer.project_tool_dir()),
            );
        }
    }
    push(
        Layer::Project,
        inputs.project.join(".toolsmith").join("tools"),
    );
    for dir in &inputs.config_dirs {
        push(Layer::Config, dir.clone());
    }
    dirs
}

/// The directories a layer directory stands for: itself, or for a layer that
/// [holds bundles](Layer::holds_bundles) the `tools/` folder of each bundle in it that has one,
/// in the sorted order of the bundles' names. `Ok(empty)` when a bundles directory does not
/// exist.
pub(crate) fn tool_dirs(layer_dir: &LayerDir, cwd: &Path) -> io::Result<Vec<PathBuf>> {
    let dir = cwd.join(&layer_dir.dir);
    if !layer_dir.layer.holds_bundles() {
        return Ok(vec![dir]);
    }
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut bundles = Vec::new();
    for entry in entries {
        let entry = entry?;
        // Hidden entries (`.git`, an editor's files) are not bundles.
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let tools = entry.path().join(BUNDLE_TOOLS_DIR);
        if tools.is_dir() {
            bundles.push(tools);
        }
    }
    bundles.sort();
    Ok(bundles)
}

/// `<prefix>/libexec/toolsmith` for the binary `<prefix>/bin/toolsmith`.
///
/// The binary's directory need not be called `bin`: a binary in `target/release` finds
/// `target/libexec/toolsmith`, so a development build behaves as an installed one.
fn system_dir(binary: &Path) -> PathBuf {
    let bin_dir = binary.parent().unwrap_or(Path::new("/"));
    let prefix = bin_dir.parent().unwrap_or(bin_dir);
    prefix.join("libexec").join("toolsmith")
}

/// The project directory of `cwd`: the work tree of the git repository enclosing it, or `cwd`
/// itself when there is none or the repository is bare.
pub fn project_dir(cwd: &Path) -> PathBuf {
    enclosing_work_tree(cwd).unwrap_or_else(|| cwd.to_path_buf())
}

/// The work tree of the git repository enclosing `cwd`, if there is one and it is not bare.
///
/// Repository discovery stops at file-system boundaries, as `git` does by default.
pub fn enclosing_work_tree(cwd: &Path) -> Option<PathBuf> {
    match git2::Repository::discover(cwd) {
        // git2 returns the work tree with a trailing separator; components drop it.
        Ok(repository) => repository
            .workdir()
            .map(|workdir| workdir.components().collect()),
        Err(error) => {
            tracing::debug!(cwd = %cwd.display(), %error, "no git repository");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::discovery::layers::{LayerDir, LayerInputs, layer_dirs, project_dir, tool_dirs};
    use crate::layer::{Layer, Peer};

    fn inputs() -> LayerInputs {
        LayerInputs {
            binary: Some(PathBuf::from("/opt/ts/bin/toolsmith")),
            toolsmith_home: None,
            home: Some(PathBuf::from("/home/ada")),
            project: PathBuf::from("/src/app"),
            config_dirs: Vec::new(),
            peers: false,
        }
    }

    fn check(inputs: LayerInputs, expect: &[&str]) {
        let actual: Vec<String> = layer_dirs(&inputs)
            .iter()
            .map(|layer_dir| format!("{} {}", layer_dir.layer, layer_dir.dir.display()))
            .collect();
        assert_eq!(actual, expect, "{inputs:?}");
    }

    #[test]
    fn defaults() {
        check(
            inputs(),
            &[
                "system /opt/ts/libexec/toolsmith",
                "user /home/ada/.config/toolsmith/tools",
                "project /src/app/.toolsmith/tools",
            ],
        );
    }

    #[test]
    fn toolsmith_home_replaces_the_user_default() {
        check(
            LayerInputs {
                toolsmith_home: Some(PathBuf::from("/data/ts")),
                ..inputs()
            },
            &[
                "system /opt/ts/libexec/toolsmith",
                "user /data/ts/tools",
                "project /src/app/.toolsmith/tools",
            ],
        );
    }

    #[test]
    fn no_home_no_binary() {
        check(
            LayerInputs {
                binary: None,
                home: None,
                ..inputs()
            },
            &["project /src/app/.toolsmith/tools"],
        );
    }

    #[test]
    fn binary_at_the_root() {
        check(
            LayerInputs {
                binary: Some(PathBuf::from("/toolsmith")),
                home: None,
                ..inputs()
            },
            &[
                "system /libexec/toolsmith",
                "project /src/app/.toolsmith/tools",
            ],
        );
    }

    #[test]
    fn config_dirs_come_last_in_order() {
        check(
            LayerInputs {
                config_dirs: vec![PathBuf::from("/b"), PathBuf::from("/a")],
                ..inputs()
            },
            &[
                "system /opt/ts/libexec/toolsmith",
                "user /home/ada/.config/toolsmith/tools",
                "project /src/app/.toolsmith/tools",
                "config /b",
                "config /a",
            ],
        );
    }

    #[test]
    fn peers_sit_below_toolsmith_in_their_scope() {
        check(
            LayerInputs {
                peers: true,
                config_dirs: vec![PathBuf::from("/extra")],
                ..inputs()
            },
            &[
                "system /opt/ts/libexec/toolsmith",
                "kodelet-plugin-user /home/ada/.kodelet/plugins",
                "nanocoder-skill-user /home/ada/.config/nanocoder/skills",
                "kodelet-user /home/ada/.kodelet/tools",
                "ikigai-user /home/ada/.ikigai/tools",
                "nanocoder-user /home/ada/.config/nanocoder/tools",
                "user /home/ada/.config/toolsmith/tools",
                "kodelet-plugin-project /src/app/.kodelet/plugins",
                "nanocoder-skill-project /src/app/.nanocoder/skills",
                "kodelet-project /src/app/kodelet-tools",
                "kodelet-project /src/app/.kodelet/tools",
                "ikigai-project /src/app/.ikigai/tools",
                "nanocoder-project /src/app/.nanocoder/tools",
                "project /src/app/.toolsmith/tools",
                "config /extra",
            ],
        );
    }

    #[test]
    fn bundles_are_each_bundles_tools_folder_in_name_order() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("skills");
        for bundle in ["zeta", "alpha", "no-tools", ".hidden"] {
            std::fs::create_dir_all(root.join(bundle)).unwrap();
        }
        for bundle in ["zeta", "alpha", ".hidden"] {
            std::fs::create_dir_all(root.join(bundle).join("tools")).unwrap();
        }
        std::fs::write(root.join("loose-file"), "").unwrap();
        let layer_dir = |layer| LayerDir {
            layer,
            dir: root.clone(),
        };
        let bundles = layer_dir(Layer::PeerProjectBundles(Peer::Nanocoder));
        assert_eq!(
            tool_dirs(&bundles, temp.path()).unwrap(),
            [root.join("alpha/tools"), root.join("zeta/tools")]
        );
        let plain = layer_dir(Layer::PeerProject(Peer::Nanocoder));
        assert_eq!(tool_dirs(&plain, temp.path()).unwrap(), vec![root.clone()]);
        let missing = LayerDir {
            layer: Layer::PeerUserBundles(Peer::Kodelet),
            dir: temp.path().join("absent"),
        };
        assert!(tool_dirs(&missing, temp.path()).unwrap().is_empty());
    }

    #[test]
    fn project_is_the_enclosing_work_tree() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        let repository = root.join("repo");
        git2::Repository::init(&repository).unwrap();
        let nested = repository.join("src/deep");
        std::fs::create_dir_all(&nested).unwrap();
        assert_eq!(project_dir(&nested), repository);
        assert_eq!(project_dir(&repository), repository);

        let bare = root.join("bare.git");
        git2::Repository::init_bare(&bare).unwrap();
        assert_eq!(project_dir(&bare), bare);

        let outside = root.join("plain");
        std::fs::create_dir_all(&outside).unwrap();
        // The temp dir may itself be inside a repository on a developer's machine, so the
        // expectation follows git's answer for the parent rather than assuming none.
        let expect = match git2::Repository::discover(&outside) {
            Ok(enclosing) => enclosing
                .workdir()
                .map_or(outside.clone(), |workdir| workdir.components().collect()),
            Err(_) => outside.clone(),
        };
        assert_eq!(project_dir(&outside), expect);
    }
}
