//! The values of settings: parsing one from the text of a file or a variable, and writing a capped one back.

use std::time::Duration;

use toolsmith_executor::{BackendChoice, RunAs};
use toolsmith_registry::{
    FilesystemSetting, NetworkSetting, Profile, SandboxProfile, SyscallsSetting, format_duration,
};

use crate::units::{self, Cap, UnitError, format_size};

/// Why a single value was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ValueError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error(transparent)]
    Backend(#[from] toolsmith_executor::UnknownBackend),
    #[error("expected a whole number of at least 1")]
    Zero,
    #[error(transparent)]
    Profile(#[from] toolsmith_registry::UnknownProfile),
    #[error(transparent)]
    ToolName(#[from] toolsmith_registry::NameError),
    #[error(transparent)]
    SecretName(#[from] toolsmith_registry::SecretNameError),
    #[error(transparent)]
    Sandbox(Box<toolsmith_registry::UnknownSetting>),
    #[error(transparent)]
    User(Box<toolsmith_executor::Error>),
    #[error(
        "setting the user tools run as needs toolsmith to run as root (it runs as uid {uid}); a non-root toolsmith's tools already run as its own uid, without capabilities"
    )]
    UserNeedsRoot { uid: u32 },
}

pub(super) fn parse_network(value: &serde_json::Value) -> Result<NetworkSetting, ValueError> {
    NetworkSetting::from_json(value).map_err(|error| ValueError::Sandbox(Box::new(error)))
}

pub(super) fn parse_filesystem(value: &serde_json::Value) -> Result<FilesystemSetting, ValueError> {
    FilesystemSetting::from_json(value).map_err(|error| ValueError::Sandbox(Box::new(error)))
}

pub(super) fn parse_sandbox_profile(text: &str) -> Result<SandboxProfile, ValueError> {
    text.parse()
        .map_err(|error| ValueError::Sandbox(Box::new(error)))
}

pub(super) fn parse_syscalls(text: &str) -> Result<SyscallsSetting, ValueError> {
    text.parse()
        .map_err(|error| ValueError::Sandbox(Box::new(error)))
}

/// Resolves `[sandbox] user` in toolsmith's own process (a user name is
/// looked up once, here); only a root toolsmith can switch identity.
pub(super) fn parse_user(text: &str) -> Result<RunAs, ValueError> {
    let uid = toolsmith_executor::effective_uid();
    if uid != 0 {
        return Err(ValueError::UserNeedsRoot { uid });
    }
    RunAs::resolve(text).map_err(|error| ValueError::User(Box::new(error)))
}

/// Parses a profile name; `none` lifts a profile set by a lower layer.
pub(crate) fn parse_profile(text: &str) -> Result<Option<Profile>, ValueError> {
    if text.trim() == "none" {
        return Ok(None);
    }
    Ok(Some(text.parse::<Profile>()?))
}

pub(super) fn duration(text: &str) -> Result<Duration, ValueError> {
    Ok(units::parse_duration(text)?)
}

pub(super) fn duration_cap(text: &str) -> Result<Cap<Duration>, ValueError> {
    Ok(units::parse_cap(text, units::parse_duration)?)
}

pub(super) fn size(text: &str) -> Result<u64, ValueError> {
    Ok(units::parse_size(text)?)
}

pub(super) fn size_cap(text: &str) -> Result<Cap<u64>, ValueError> {
    Ok(units::parse_cap(text, units::parse_size)?)
}

pub(super) fn count_cap(text: &str) -> Result<Cap<u64>, ValueError> {
    Ok(units::parse_cap(text, units::parse_count)?)
}

/// Parses a backend name or `auto`.
pub(crate) fn parse_backend(text: &str) -> Result<BackendChoice, ValueError> {
    Ok(text.trim().parse::<BackendChoice>()?)
}

/// Parses a positive number of concurrent runs.
pub(crate) fn parse_max_concurrent(text: &str) -> Result<usize, ValueError> {
    match units::parse_count(text)? {
        0 => Err(ValueError::Zero),
        count => Ok(usize::try_from(count).unwrap_or(usize::MAX)),
    }
}

/// A capped value as written in the file, for messages and `--show-settings`.
pub(crate) fn describe_cap<T>(cap: Cap<T>, format: fn(T) -> String) -> String {
    match cap {
        Cap::Unlimited => "unlimited".to_owned(),
        Cap::At(value) => format(value),
    }
}

/// A capped duration as written in the file.
pub(super) fn show_duration_cap(cap: Cap<Duration>) -> String {
    describe_cap(cap, format_duration)
}

/// A capped size as written in the file.
pub(super) fn show_size_cap(cap: Cap<u64>) -> String {
    describe_cap(cap, format_size)
}

/// A capped count as written in the file.
pub(super) fn show_count_cap(cap: Cap<u64>) -> String {
    describe_cap(cap, |count| count.to_string())
}
