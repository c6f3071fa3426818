//! Who a call is: its own id and the id of the session it belongs to, which every tool
//! process receives in its environment ([`CALL_ID_VAR`], [`SESSION_ID_VAR`], and for a
//! Kodelet tool [`KODELET_CONVERSATION_VAR`]).
//!
//! The registry builds these variables; the caller says which session a call belongs to
//! (the CLI: one per invocation; `serve`: one per MCP session). They are set per call after
//! toolsmith's own `TOOLSMITH_*` variables have been removed from the tool's environment, so
//! a tool can only ever see the values of its own call, never any of toolsmith's.

use std::ffi::OsString;
use std::fmt;

/// The variable holding the call's id, unique to each call.
pub const CALL_ID_VAR: &str = "TOOLSMITH_CALL_ID";

/// The variable holding the session's id: equal for every call of one MCP session (or one CLI
/// invocation), different between sessions.
pub const SESSION_ID_VAR: &str = "TOOLSMITH_SESSION_ID";

/// The variable Kodelet gives its custom tools to key their state by conversation; a Kodelet
/// tool receives the session id in it.
pub const KODELET_CONVERSATION_VAR: &str = "KODELET_CONVERSATION_ID";

/// An opaque random id (128 bits, written as a UUID v4), for a call or a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id(String);

impl Id {
    /// A new random id.
    ///
    /// # Panics
    ///
    /// When the kernel's random source fails, which `getrandom(2)` does not on any kernel
    /// toolsmith supports (3.17 and later): an id that could repeat would merge two sessions.
    pub fn random() -> Id {
        let mut bytes = [0_u8; 16];
        getrandom::fill(&mut bytes).expect("the kernel's random source answers getrandom(2)");
        // RFC 9562: version 4, variant 0b10.
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        Id(format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        ))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The ids of one call: its own and its session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallIdentity {
    call: Id,
    session: Id,
}

impl CallIdentity {
    /// A new call of `session`.
    pub fn in_session(session: &Id) -> CallIdentity {
        CallIdentity {
            call: Id::random(),
            session: session.clone(),
        }
    }

    /// A call that is a session of its own (a library caller that keeps no session).
    pub fn alone() -> CallIdentity {
        CallIdentity::in_session(&Id::random())
    }

    /// The call's id.
    pub fn call_id(&self) -> &Id {
        &self.call
    }

    /// The session's id.
    pub fn session_id(&self) -> &Id {
        &self.session
    }

    /// The variables of this call for a tool; `kodelet` adds Kodelet's conversation id.
    pub(crate) fn vars(&self, kodelet: bool) -> Vec<(OsString, OsString)> {
        let mut vars = vec![
            (CALL_ID_VAR.into(), self.call.as_str().into()),
            (SESSION_ID_VAR.into(), self.session.as_str().into()),
        ];
        if kodelet {
            vars.push((
                KODELET_CONVERSATION_VAR.into(),
                self.session.as_str().into(),
            ));
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use crate::call::identity::{CallIdentity, Id};

    #[test]
    fn ids_are_uuid_v4_and_differ() {
        let first = Id::random();
        let second = Id::random();
        assert_ne!(first, second);
        let text = first.as_str();
        assert_eq!(text.len(), 36, "{text}");
        assert_eq!(&text[14..15], "4", "{text}");
        assert!(matches!(&text[19..20], "8" | "9" | "a" | "b"), "{text}");
    }

    #[test]
    fn calls_of_one_session_share_it_and_nothing_else() {
        let session = Id::random();
        let first = CallIdentity::in_session(&session);
        let second = CallIdentity::in_session(&session);
        assert_eq!(first.session_id(), second.session_id());
        assert_ne!(first.call_id(), second.call_id());
        assert_ne!(
            CallIdentity::alone().session_id(),
            CallIdentity::alone().session_id()
        );
    }

    #[test]
    fn only_kodelet_tools_get_the_conversation_id() {
        let identity = CallIdentity::alone();
        let names = |kodelet| -> Vec<String> {
            identity
                .vars(kodelet)
                .into_iter()
                .map(|(name, _)| name.into_string().unwrap())
                .collect()
        };
        assert_eq!(names(false), ["TOOLSMITH_CALL_ID", "TOOLSMITH_SESSION_ID"]);
        assert_eq!(
            names(true),
            [
                "TOOLSMITH_CALL_ID",
                "TOOLSMITH_SESSION_ID",
                "KODELET_CONVERSATION_ID"
            ]
        );
        let conversation = &identity.vars(true)[2].1;
        assert_eq!(conversation, identity.session_id().as_str());
    }
}
