//! Where a tool comes from: the [`Layer`] of its directory, and the [`Peer`] frameworks whose
//! directories can be layered in. Computing the directories is discovery's
//! ([`crate::discovery::layers`]).

use std::fmt;

/// Another agent framework whose tool directories toolsmith can read, so that users can migrate
/// by switching peers on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// Kodelet: `~/.kodelet/tools` and `./.kodelet/tools`.
    Kodelet,
    /// ikigai: `~/.ikigai/tools` and `./.ikigai/tools`.
    Ikigai,
    /// Nanocoder: `~/.config/nanocoder/tools` and `./.nanocoder/tools`.
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
}

/// Where a tool directory comes from; it decides precedence and how a missing directory is
/// treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Tools installed with toolsmith, next to the binary.
    System,
    /// A peer's user directory (peers switched on).
    PeerUser(Peer),
    /// The user's own tools.
    User,
    /// A peer's project directory (peers switched on).
    PeerProject(Peer),
    /// The project's tools.
    Project,
    /// A directory named in the config file.
    Config,
    /// A directory given on the command line (`--tools-dir`) or to [`discover`](crate::discovery::discover::discover):
    /// exactly the directories asked for, in their order.
    Explicit,
}

impl Layer {
    /// The layer's name in listings and JSON, e.g. `user` or `kodelet-project`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::System => "system",
            Layer::PeerUser(Peer::Kodelet) => "kodelet-user",
            Layer::PeerUser(Peer::Ikigai) => "ikigai-user",
            Layer::PeerUser(Peer::Nanocoder) => "nanocoder-user",
            Layer::User => "user",
            Layer::PeerProject(Peer::Kodelet) => "kodelet-project",
            Layer::PeerProject(Peer::Ikigai) => "ikigai-project",
            Layer::PeerProject(Peer::Nanocoder) => "nanocoder-project",
            Layer::Project => "project",
            Layer::Config => "config",
            Layer::Explicit => "explicit",
        }
    }

    /// Whether a missing directory of this layer is a problem: it is for directories the user
    /// named, and normal for the default locations.
    pub fn missing_is_problem(self) -> bool {
        matches!(self, Layer::Config | Layer::Explicit)
    }

    /// Whether the layer is the project's (toolsmith's own, or a peer's): written by whoever
    /// wrote the project, read only while the project is trusted.
    pub fn is_project(self) -> bool {
        matches!(self, Layer::Project | Layer::PeerProject(_))
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
