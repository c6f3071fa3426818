//! Policy: which tools may be listed and called (disabled and allowed lists, the `plan` and `unattended` profiles), and why not.
//!
//! The checks apply in a fixed order and the first that fails is the reason:
//! 1. a disabled tool is denied (`[policy] disabled`, `[tools.NAME] disabled = true`);
//! 2. when an allowed list is set, a tool not on it is denied;
//! 3. the profile, if any:
//!    - `plan` admits only tools that declare `read_only: true` (a manifest in its frontmatter,
//!      an executable in its description or schema), whatever their approval.
//!      The Nanocoder proposal excludes a tool when "approval is not never AND read_only is not true",
//!      which would admit a tool that changes things as long as it needs no approval; every executable
//!      without annotations is such a tool (approval defaults to `never`), so plan mode would run
//!      anything. Plan mode exists to rule out changes, so toolsmith keeps the proposal's intent ("a
//!      read-only no-approval tool is safe; anything else is mutation-risk") and the issue's wording
//!      ("read-only tools only"): `read_only` decides. Approval is the host's business in plan mode, as
//!      it is in Nanocoder, where a read-only tool that asks for approval is still admitted.
//!    - `unattended` (Nanocoder's scheduler mode) admits only tools whose approval is `never`: no
//!      human is there to confirm, and `destructive` needs one as much as `always` does.

use std::fmt;
use std::str::FromStr;

use crate::formats::annotations::{Annotations, Approval};
use crate::name::ToolName;
use crate::tool::Tool;

/// A named restriction for a kind of session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Planning: only tools that declare themselves read-only.
    Plan,
    /// Nobody is there to approve: only tools that never need approval.
    Unattended,
}

impl Profile {
    /// The name used in flags and config, e.g. `plan`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Plan => "plan",
            Profile::Unattended => "unattended",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A profile name that is not `plan` or `unattended`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown profile `{name}` (expected plan or unattended)")]
pub struct UnknownProfile {
    /// The name given.
    pub name: String,
}

impl FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(text: &str) -> Result<Profile, UnknownProfile> {
        match text.trim() {
            "plan" => Ok(Profile::Plan),
            "unattended" => Ok(Profile::Unattended),
            other => Err(UnknownProfile {
                name: other.to_owned(),
            }),
        }
    }
}

/// Why policy keeps a tool from being listed and called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Denial {
    /// The operator disabled the tool.
    Disabled,
    /// An allowed list is set and does not name the tool.
    NotAllowed,
    /// The `plan` profile admits only read-only tools.
    PlanNeedsReadOnly,
    /// The `unattended` profile admits only tools that never need approval.
    UnattendedNeedsNoApproval {
        /// What the tool declares.
        approval: Approval,
    },
}

impl Denial {
    /// A stable code for JSON output, e.g. `disabled`.
    pub fn code(self) -> &'static str {
        match self {
            Denial::Disabled => "disabled",
            Denial::NotAllowed => "not_allowed",
            Denial::PlanNeedsReadOnly => "plan_needs_read_only",
            Denial::UnattendedNeedsNoApproval { .. } => "unattended_needs_no_approval",
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denial::Disabled => f.write_str("disabled by config"),
            Denial::NotAllowed => f.write_str("not in the allowed list"),
            Denial::PlanNeedsReadOnly => {
                f.write_str("profile plan admits only read-only tools, and this one is not")
            }
            Denial::UnattendedNeedsNoApproval { approval } => write!(
                f,
                "profile unattended admits only tools that never need approval, and this one's approval is `{}`",
                approval.as_str()
            ),
        }
    }
}

/// Which tools may be listed and called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Tools that are never listed or called.
    pub disabled: Vec<ToolName>,
    /// When set, only these tools are listed and called.
    pub allowed: Option<Vec<ToolName>>,
    /// The profile in force, if any.
    pub profile: Option<Profile>,
}

impl Policy {
    /// The policy that admits every tool.
    pub fn allow_all() -> Policy {
        Policy {
            disabled: Vec::new(),
            allowed: None,
            profile: None,
        }
    }

    /// Whether `tool` may be listed and called, and if not, why.
    pub fn check(&self, tool: &Tool) -> Result<(), Denial> {
        self.check_declared(tool.name(), tool.annotations())
    }

    /// Whether the meta-tool `custom_tool` may be listed and called, and if not, why: the
    /// same checks as every tool, by its name in the lists (`disabled = ["custom_tool"]`,
    /// an `allowed` list without it) and by what it is for the profiles: it writes and runs
    /// code the agent chose, so it is not read-only and needs approval.
    pub fn check_meta_tool(&self) -> Result<(), Denial> {
        self.check_declared(
            &ToolName::meta_tool(),
            &Annotations {
                title: None,
                approval: Approval::Always,
                read_only: false,
                declared: true,
            },
        )
    }

    /// Whether discovery may look at a file that would provide `name` (run an executable to
    /// ask for its description, or read a manifest), before anything is known of the tool:
    /// only the lists decide, by name. The profile decides after, on what the tool declares
    /// ([`Policy::check`] at every listing and call): an executable may declare `read_only`
    /// and `approval` as a manifest does, so `plan` admits an executable that says it only
    /// reads. A probe only asks a tool to describe itself, in the probes' strictest sandbox.
    pub(crate) fn check_unprobed(&self, name: &ToolName) -> Result<(), Denial> {
        if self.disabled.contains(name) {
            return Err(Denial::Disabled);
        }
        match &self.allowed {
            Some(allowed) if !allowed.contains(name) => Err(Denial::NotAllowed),
            _ => Ok(()),
        }
    }

    fn check_declared(&self, name: &ToolName, annotations: &Annotations) -> Result<(), Denial> {
        if self.disabled.contains(name) {
            return Err(Denial::Disabled);
        }
        if let Some(allowed) = &self.allowed
            && !allowed.contains(name)
        {
            return Err(Denial::NotAllowed);
        }
        match self.profile {
            Some(Profile::Plan) if !annotations.read_only => Err(Denial::PlanNeedsReadOnly),
            Some(Profile::Unattended) if annotations.approval != Approval::Never => {
                Err(Denial::UnattendedNeedsNoApproval {
                    approval: annotations.approval,
                })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::annotations::{Annotations, Approval};
    use crate::name::ToolName;
    use crate::policy::{Denial, Policy, Profile};

    fn check(policy: &Policy, approval: Approval, read_only: bool, expect: Result<(), Denial>) {
        let annotations = Annotations {
            title: None,
            approval,
            read_only,
            declared: true,
        };
        let name = ToolName::new("demo").unwrap();
        assert_eq!(
            policy.check_declared(&name, &annotations),
            expect,
            "{policy:?} {approval:?} read_only={read_only}"
        );
    }

    fn profile(profile: Option<Profile>) -> Policy {
        Policy {
            profile,
            ..Policy::allow_all()
        }
    }

    #[test]
    fn no_profile_admits_everything() {
        for approval in [Approval::Never, Approval::Always, Approval::Destructive] {
            for read_only in [false, true] {
                check(&profile(None), approval, read_only, Ok(()));
            }
        }
    }

    #[test]
    fn plan_admits_read_only_tools_whatever_their_approval() {
        let plan = profile(Some(Profile::Plan));
        for approval in [Approval::Never, Approval::Always, Approval::Destructive] {
            check(&plan, approval, true, Ok(()));
            check(&plan, approval, false, Err(Denial::PlanNeedsReadOnly));
        }
    }

    #[test]
    fn unattended_admits_tools_that_never_need_approval() {
        let unattended = profile(Some(Profile::Unattended));
        for read_only in [false, true] {
            check(&unattended, Approval::Never, read_only, Ok(()));
            for approval in [Approval::Always, Approval::Destructive] {
                check(
                    &unattended,
                    approval,
                    read_only,
                    Err(Denial::UnattendedNeedsNoApproval { approval }),
                );
            }
        }
    }

    #[test]
    fn lists_come_before_the_profile() {
        let demo = ToolName::new("demo").unwrap();
        let other = ToolName::new("other").unwrap();
        let disabled = Policy {
            disabled: vec![demo.clone()],
            allowed: Some(vec![demo.clone()]),
            profile: Some(Profile::Plan),
        };
        check(&disabled, Approval::Never, false, Err(Denial::Disabled));
        let not_allowed = Policy {
            disabled: Vec::new(),
            allowed: Some(vec![other]),
            profile: Some(Profile::Plan),
        };
        check(&not_allowed, Approval::Never, true, Err(Denial::NotAllowed));
        let allowed = Policy {
            allowed: Some(vec![demo]),
            ..Policy::allow_all()
        };
        check(&allowed, Approval::Always, false, Ok(()));
    }

    #[test]
    fn the_meta_tool_obeys_lists_and_profiles() {
        let meta = ToolName::in_policy_list("custom_tool").unwrap();
        let other = ToolName::new("other").unwrap();
        assert_eq!(Policy::allow_all().check_meta_tool(), Ok(()));
        let disabled = Policy {
            disabled: vec![meta.clone()],
            ..Policy::allow_all()
        };
        assert_eq!(disabled.check_meta_tool(), Err(Denial::Disabled));
        let not_allowed = Policy {
            allowed: Some(vec![other.clone()]),
            ..Policy::allow_all()
        };
        assert_eq!(not_allowed.check_meta_tool(), Err(Denial::NotAllowed));
        let allowed = Policy {
            allowed: Some(vec![other, meta]),
            ..Policy::allow_all()
        };
        assert_eq!(allowed.check_meta_tool(), Ok(()));
        assert_eq!(
            profile(Some(Profile::Plan)).check_meta_tool(),
            Err(Denial::PlanNeedsReadOnly)
        );
        assert_eq!(
            profile(Some(Profile::Unattended)).check_meta_tool(),
            Err(Denial::UnattendedNeedsNoApproval {
                approval: Approval::Always
            })
        );
        // The meta-tool's name in a list names no tool: a tool cannot take it.
        assert!(ToolName::new("custom_tool").is_err());
        assert_eq!(
            ToolName::in_policy_list("custom_tool_x").unwrap(),
            ToolName::new("x").unwrap()
        );
    }

    #[test]
    fn profile_names() {
        assert_eq!("plan".parse::<Profile>().unwrap(), Profile::Plan);
        assert_eq!(
            " unattended".parse::<Profile>().unwrap(),
            Profile::Unattended
        );
        assert_eq!(
            "yolo".parse::<Profile>().unwrap_err().to_string(),
            "unknown profile `yolo` (expected plan or unattended)"
        );
    }

    #[test]
    fn reasons_read_as_sentences() {
        assert_eq!(Denial::Disabled.to_string(), "disabled by config");
        assert_eq!(
            Denial::UnattendedNeedsNoApproval {
                approval: Approval::Destructive
            }
            .to_string(),
            "profile unattended admits only tools that never need approval, and this one's approval is `destructive`"
        );
    }
}
