//! What a tool declares about itself for policy and agents: its [`Annotations`], with the
//! [`Approval`] a call needs.

/// Whether a call needs a human's approval, as the tool declares it.
///
/// toolsmith does not prompt anyone: it carries the annotation to agents
/// (MCP annotations) and uses it in profiles (`unattended` leaves out the
/// tools that need approval).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Approval {
    /// Never needs approval.
    Never,
    /// Always needs approval.
    Always,
    /// Needs approval because it changes things that are hard to undo.
    Destructive,
}

impl Approval {
    /// The name used in manifests and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Never => "never",
            Approval::Always => "always",
            Approval::Destructive => "destructive",
        }
    }
}

/// What a tool declares about itself for policy and for agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotations {
    /// A human-readable title, if the tool gives one.
    pub title: Option<String>,
    /// Whether calls need approval.
    pub approval: Approval,
    /// True when the tool only reads: it changes nothing outside its own process.
    pub read_only: bool,
}

impl Annotations {
    /// The annotations of a tool that declares none: the executable formats
    /// come from systems without an approval step, so their tools run
    /// without one, and nothing is assumed about what they change.
    pub fn undeclared() -> Annotations {
        Annotations {
            title: None,
            approval: Approval::Never,
            read_only: false,
        }
    }
}
