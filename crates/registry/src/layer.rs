//! Where a tool comes from: the [`Layer`] of its directory, and the [`Peer`] frameworks whose
//! directories can be layered in. Computing the directories is discovery's
//! ([`crate::discovery::layers`]).

use std::fmt;

/// Another agent framework whose tool directories toolsmith can read, so that users can migrate
/// by switching peers on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// Kodelet: `~/.kodelet/tools` and `./.kodelet/tools` (and its earlier `./kodelet-tools`),
    /// and its plugins' `tools/` folders (`~/.kodelet/plugins/<org@repo>/tools`, and the same
    /// in the project).
    Kodelet,
    /// ikigai: `~/.ikigai/tools` and `./.ikigai/tools`.
    Ikigai,
    /// Nanocoder: `~/.config/nanocoder/tools` and `./.nanocoder/tools`, and its skill bundles'
    /// `tools/` folders (`~/.config/nanocoder/skills/<skill>/tools`, and the same in the
    /// project).
    Nanocoder,
}

impl Peer {
    /// Every peer, in the order their directories are layered (later wins within a scope).
    pub const ALL: [Peer; 3] = [Peer::Kodelet, Peer::Ikigai, Peer::Nanocoder];

    /// The peer's name in listings, e.g. `kodelet`.
    pub fn as_str(self) -> &'static str {
        match self {
            Peer::Kodelet => "kodelet",
            Peer::Ikigai => "ikigai",
            Peer::Nanocoder => "nanocoder",
        }
    }

    /// The peer's user tool directory, relative to the home directory.
    pub(crate) fn user_dir(self) -> &'static str {
        match self {
            Peer::Kodelet => ".kodelet/tools",
            Peer::Ikigai => ".ikigai/tools",
            Peer::Nanocoder => ".config/nanocoder/tools",
        }
    }

    /// The peer's project tool directory, relative to the project.
    pub fn project_tool_dir(self) -> &'static str {
        match self {
            Peer::Kodelet => ".kodelet/tools",
            Peer::Ikigai => ".ikigai/tools",
            Peer::Nanocoder => ".nanocoder/tools",
        }
    }

    /// The peer's earlier project tool directory, still read below the current one: Kodelet's
    /// `./kodelet-tools`, where its own examples live.
    pub fn legacy_project_tool_dir(self) -> Option<&'static str> {
        match self {
            Peer::Kodelet => Some("kodelet-tools"),
            Peer::Ikigai | Peer::Nanocoder => None,
        }
    }

    /// The directory of the peer's bundles (Kodelet's plugins, Nanocoder's skills), relative
    /// to its user directory's parent and to the project; each bundle's tools are in its
    /// `tools/` folder.
    pub fn bundles_dir(self) -> Option<&'static str> {
        match self {
            Peer::Kodelet => Some(".kodelet/plugins"),
            Peer::Ikigai => None,
            Peer::Nanocoder => Some(".nanocoder/skills"),
        }
    }

    /// The peer's user bundles directory, relative to the home directory.
    pub(crate) fn user_bundles_dir(self) -> Option<&'static str> {
        match self {
            Peer::Kodelet => Some(".kodelet/plugins"),
            Peer::Ikigai => None,
            Peer::Nanocoder => Some(".config/nanocoder/skills"),
        }
    }

    /// Every directory of the peer's in a project, relative to it: the paths a tool that may
    /// write the project must not write (see [`protected_paths`](crate::sandbox::protected_paths)).
    pub fn project_dirs(self) -> Vec<&'static str> {
        let mut dirs = vec![self.project_tool_dir()];
        dirs.extend(self.legacy_project_tool_dir());
        dirs.extend(self.bundles_dir());
        dirs
    }
}

/// The folder holding a bundle's tools, inside each bundle of a bundles directory.
pub(crate) const BUNDLE_TOOLS_DIR: &str = "tools";

/// Where a tool directory comes from; it decides precedence and how a missing directory is
/// treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Tools installed with toolsmith, next to the binary.
    System,
    /// A peer's user bundles directory (peers switched on): the `tools/` folder of each of its
    /// bundles, in the sorted order of their names.
    PeerUserBundles(Peer),
    /// A peer's user directory (peers switched on).
    PeerUser(Peer),
    /// The user's own tools.
    User,
    /// A peer's project bundles directory (peers switched on), as [`Layer::PeerUserBundles`].
    PeerProjectBundles(Peer),
    /// A peer's project directory (peers switched on).
    PeerProject(Peer),
    /// The project's tools.
    Project,
    /// A directory named in the config file.
    Config,
    /// A directory given on the command line (`--tools-dir`) or to [`Toolsmith::discover`](crate::front::Toolsmith::discover):
    /// exactly the directories asked for, in their order.
    Explicit,
}

impl Layer {
    /// The layer's name in listings and JSON, e.g. `user` or `kodelet-project`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::System => "system",
            Layer::PeerUserBundles(Peer::Kodelet) => "kodelet-plugin-user",
            Layer::PeerUserBundles(Peer::Ikigai) => "ikigai-bundle-user",
            Layer::PeerUserBundles(Peer::Nanocoder) => "nanocoder-skill-user",
            Layer::PeerUser(Peer::Kodelet) => "kodelet-user",
            Layer::PeerUser(Peer::Ikigai) => "ikigai-user",
            Layer::PeerUser(Peer::Nanocoder) => "nanocoder-user",
            Layer::User => "user",
            Layer::PeerProject(Peer::Kodelet) => "kodelet-project",
            Layer::PeerProject(Peer::Ikigai) => "ikigai-project",
            Layer::PeerProject(Peer::Nanocoder) => "nanocoder-project",
            Layer::PeerProjectBundles(Peer::Kodelet) => "kodelet-plugin-project",
            Layer::PeerProjectBundles(Peer::Ikigai) => "ikigai-bundle-project",
            Layer::PeerProjectBundles(Peer::Nanocoder) => "nanocoder-skill-project",
            Layer::Project => "project",
            Layer::Config => "config",
            Layer::Explicit => "explicit",
        }
    }

    /// Whether the layer's directories belong to the project, so that they are read only in a
    /// trusted project and never through a symbolic link.
    pub fn in_project(self) -> bool {
        matches!(
            self,
            Layer::Project | Layer::PeerProject(_) | Layer::PeerProjectBundles(_)
        )
    }

    /// Whether the layer's directory holds bundles, each with its tools in its `tools/` folder,
    /// rather than tools.
    pub fn holds_bundles(self) -> bool {
        matches!(
            self,
            Layer::PeerUserBundles(_) | Layer::PeerProjectBundles(_)
        )
    }

    /// Whether a missing directory of this layer is a problem: it is for directories the user
    /// named, and normal for the default locations.
    pub fn missing_is_problem(self) -> bool {
        matches!(self, Layer::Config | Layer::Explicit)
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
