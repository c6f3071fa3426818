//! `toolsmith show NAME`: one tool in full, with the limits a call would get and what policy says about it.

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::{Executor, Features};
use toolsmith_registry::{
    CallConfig, DeniedTool, Policy, SecretName, TestCase, TimeoutSource, Tool, ToolName,
    format_duration,
};

use crate::args::ShowArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output::{self, Cell, Paint};
use crate::settings::{GlobalSettings, limits_json};

/// Prints the tool; a name that no tool has is status 1, with the reasons
/// (files of that name that failed to load) on stderr.
pub(crate) async fn show(
    args: &ShowArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let name = ToolName::from_exposed_or_plain(&args.name);
    let config = global.run_config(&global.cwd, None);
    let policy = global.policy(args.profile);
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        config.clone(),
        policy.clone(),
    );
    let catalog = match &name {
        Ok(name) => Some(discover::discover_tool(global, &toolsmith, name).await),
        Err(_) => None,
    };
    let denied = catalog
        .as_ref()
        .zip(name.as_ref().ok())
        .and_then(|(catalog, name)| catalog.get_denied(name));
    if let Some(denied) = denied {
        if args.json {
            output::write_json(&denied_json(denied, &policy))?;
        } else {
            output::write_text(&denied_text(denied, &policy).context("cannot format the tool")?)?;
        }
        return Ok(ExitStatus::Success);
    }
    let found = catalog
        .as_ref()
        .zip(name.as_ref().ok())
        .and_then(|(catalog, name)| catalog.get(name).map(|tool| (catalog, tool)));
    let Some((catalog, tool)) = found else {
        let error_mark = output::Paint::Bad.paint("error:");
        let mut text = match &name {
            Ok(_) => format!(
                "{error_mark} no tool named {:?} in the tool directories\n",
                args.name
            ),
            Err(error) => format!("{error_mark} no tool named {:?}: {error}\n", args.name),
        };
        for problem in catalog.iter().flat_map(|catalog| catalog.problems()) {
            writeln!(text, "  {}: {}", problem.path.display(), problem.message())
                .context("cannot format the report")?;
        }
        text.push_str(&super::unknown_tool_hint(&args.name, global, executor).await);
        output::write_stderr(&text);
        return Ok(ExitStatus::Failure);
    };
    let call = config.call_config(tool);
    let shadowed: Vec<&std::path::Path> = catalog
        .shadowed()
        .iter()
        .filter(|shadowed| shadowed.tool.name() == tool.name())
        .map(|shadowed| shadowed.tool.path())
        .collect();
    if args.json {
        let mut document = tool_json(tool, &policy, &call);
        let (applied, missing) = isolation(executor.features(), &call);
        document["sandbox"]["isolation"] = json!(applied);
        document["sandbox"]["not_enforced"] = json!(missing);
        document["shadowed"] = json!(shadowed);
        output::write_json(&document)?;
    } else {
        let mut text = tool_text(tool, &policy, &call, executor.features())
            .context("cannot format the tool")?;
        for path in shadowed {
            writeln!(text, "shadows:       {}", path.display())
                .context("cannot format the tool")?;
        }
        output::write_text(&text)?;
    }
    Ok(ExitStatus::Success)
}

/// A file policy refuses: discovery never ran it, so what is known is its path and the verdict.
fn denied_json(denied: &DeniedTool, policy: &Policy) -> serde_json::Value {
    json!({
        "name": denied.name.as_str(),
        "exposed_name": denied.name.exposed(),
        "path": denied.path,
        "source": denied.source,
        "layer": denied.layer.as_str(),
        "probed": false,
        "policy": {
            "allowed": false,
            "profile": policy.profile.map(|profile| profile.as_str()),
            "reason": denied.denial.to_string(),
            "reason_code": denied.denial.code(),
        },
    })
}

fn denied_text(denied: &DeniedTool, policy: &Policy) -> Result<String, std::fmt::Error> {
    let label = |text: &str| Cell::painted(text, Paint::Header);
    let profile = policy
        .profile
        .map(|profile| format!(" (profile {profile})"))
        .unwrap_or_default();
    let rows = vec![
        vec![
            label("name:"),
            Cell::painted(denied.name.to_string(), Paint::Name),
        ],
        vec![label("exposed name:"), Cell::plain(denied.name.exposed())],
        vec![
            label("path:"),
            Cell::plain(denied.path.display().to_string()),
        ],
        vec![
            label("source:"),
            Cell::plain(denied.source.display().to_string()),
        ],
        vec![
            label("policy:"),
            Cell::painted(format!("denied{profile}: {}", denied.denial), Paint::Bad),
        ],
        vec![
            label("description:"),
            Cell::plain("not known: policy refuses to run this file, so discovery did not ask it"),
        ],
    ];
    let mut text = output::table("", &[], &rows);
    if !text.ends_with('\n') {
        writeln!(text)?;
    }
    Ok(text)
}

fn tool_json(tool: &Tool, policy: &Policy, call: &CallConfig) -> serde_json::Value {
    let annotations = tool.annotations();
    let verdict = match policy.check(tool) {
        Ok(()) => {
            json!({"allowed": true, "profile": policy.profile.map(|profile| profile.as_str())})
        }
        Err(denial) => json!({
            "allowed": false,
            "profile": policy.profile.map(|profile| profile.as_str()),
            "reason": denial.to_string(),
            "reason_code": denial.code(),
        }),
    };
    let mut limits = limits_json(&call.limits);
    limits["timeout_source"] = timeout_source_json(call.timeout_source);
    json!({
        "name": tool.name().as_str(),
        "exposed_name": tool.name().exposed(),
        "kind": tool.kind().as_str(),
        "description": tool.description(),
        "path": tool.path(),
        "source": tool.source(),
        "annotations": {
            "title": annotations.title,
            "approval": annotations.approval.as_str(),
            "read_only": annotations.read_only,
        },
        "input_schema": tool.input_schema().as_json(),
        "output_schema": tool.output_schema().map(|schema| schema.as_json()),
        "tests": tool.tests().iter().map(TestCase::to_json).collect::<Vec<_>>(),
        "policy": verdict,
        "limits": limits,
        "sandbox": sandbox_json(tool, call),
    })
}

/// The `sandbox` object of `show --json`: the effective grant, what the tool declares, and its
/// read masks where the tool or the operator says something of its own (`doctor` lists the
/// masks of every tool).
fn sandbox_json(tool: &Tool, call: &CallConfig) -> serde_json::Value {
    let mut sandbox = json!({
            "network": call.sandbox.network.to_json(),
            "filesystem": call.sandbox.filesystem.to_json(),
            "syscalls": call.sandbox.syscalls.as_str(),
            "user": call.sandbox.user.map(|user| user.to_string()),
            "declared": {
                "network": tool.sandbox().network.as_ref().map(|setting| setting.to_json()),
                "filesystem": tool.sandbox().filesystem.as_ref().map(|setting| setting.to_json()),
                "secrets": secret_names(&tool.sandbox().secrets),
            },
            "secrets": secret_names(&call.secrets),
            "denied": call.denied,
    });
    let declared = tool.sandbox();
    if !declared.read_hide.is_empty() {
        sandbox["declared"]["read_hide"] = json!(declared.read_hide);
    }
    if !declared.read_reveal.is_empty() {
        sandbox["declared"]["read_reveal"] = json!(declared.read_reveal);
    }
    if let Err(denied) = &call.hidden {
        sandbox["read_reveal_denied"] = json!(denied.to_string());
    }
    sandbox
}

fn timeout_source_json(source: TimeoutSource) -> serde_json::Value {
    match source {
        TimeoutSource::Override => json!({"from": "override"}),
        TimeoutSource::Requested { requested, ceiling } => json!({
            "from": "requested",
            "requested": format_duration(requested),
            "ceiling": format_duration(ceiling),
        }),
        TimeoutSource::Configured => json!({"from": "limits"}),
    }
}

/// The namespaces a call of the tool gets on this kernel, and those it
/// would get but the kernel refuses, with why.
fn isolation(features: &Features, call: &CallConfig) -> (Vec<&'static str>, Vec<String>) {
    let mut applied = Vec::new();
    let mut missing = Vec::new();
    for (wanted, name, probe) in [
        (
            call.sandbox.private_pids,
            "pid namespace",
            &features.private_proc,
        ),
        (true, "mount namespace", &features.private_mounts),
        (true, "ipc and uts namespaces", &features.ipc_namespace),
    ] {
        match (wanted, probe.available) {
            (false, _) => {}
            (true, true) => applied.push(name),
            (true, false) => missing.push(format!("{name}: {}", probe.detail)),
        }
    }
    (applied, missing)
}

fn tool_text(
    tool: &Tool,
    policy: &Policy,
    call: &CallConfig,
    features: &Features,
) -> Result<String, std::fmt::Error> {
    let label = |text: &str| Cell::painted(text, Paint::Header);
    let mut text = String::new();
    let annotations = tool.annotations();
    let mut rows = vec![
        vec![
            label("name:"),
            Cell::painted(tool.name().to_string(), Paint::Name),
        ],
        vec![label("exposed name:"), Cell::plain(tool.name().exposed())],
        vec![label("kind:"), Cell::plain(tool.kind().to_string())],
        vec![label("description:"), Cell::plain(tool.description())],
        vec![
            label("path:"),
            Cell::plain(tool.path().display().to_string()),
        ],
        vec![
            label("source:"),
            Cell::plain(tool.source().display().to_string()),
        ],
    ];
    if let Some(title) = &annotations.title {
        rows.push(vec![label("title:"), Cell::plain(title.clone())]);
    }
    rows.push(vec![
        label("annotations:"),
        Cell::plain(format!(
            "approval {}, read_only {}",
            annotations.approval.as_str(),
            annotations.read_only
        )),
    ]);
    let profile = policy
        .profile
        .map(|profile| format!(" (profile {profile})"))
        .unwrap_or_default();
    rows.push(vec![
        label("policy:"),
        match policy.check(tool) {
            Ok(()) => Cell::painted(format!("allowed{profile}"), Paint::Good),
            Err(denial) => Cell::painted(format!("denied{profile}: {denial}"), Paint::Bad),
        },
    ]);
    rows.extend(sandbox_rows(tool, call, features));
    rows.extend(secrets_row(tool, call));
    text.push_str(&output::table("", &[], &rows));
    let timeout_source = match call.timeout_source {
        TimeoutSource::Override => "[tools] override or flag".to_owned(),
        TimeoutSource::Requested { requested, ceiling } => format!(
            "requested {} by the tool, ceiling {}",
            format_duration(requested),
            format_duration(ceiling)
        ),
        TimeoutSource::Configured => "[limits]".to_owned(),
    };
    writeln!(text, "{}", Paint::Header.paint("limits:"))?;
    if let serde_json::Value::Object(limits) = limits_json(&call.limits) {
        let rows: Vec<Vec<Cell>> = limits
            .iter()
            .map(|(key, value)| {
                let value = value.as_str().unwrap_or_default();
                let value = if key == "timeout" {
                    format!("{value} ({timeout_source})")
                } else {
                    value.to_owned()
                };
                vec![Cell::plain(key.clone()), Cell::plain(value)]
            })
            .collect();
        text.push_str(&output::table("  ", &[], &rows));
    }
    writeln!(text, "{}", Paint::Header.paint("input schema:"))?;
    write_indented(&mut text, tool.input_schema().as_json())?;
    match tool.output_schema() {
        Some(schema) => {
            writeln!(text, "{}", Paint::Header.paint("output schema:"))?;
            write_indented(&mut text, schema.as_json())?;
        }
        None => writeln!(text, "{} none", Paint::Header.paint("output schema:"))?,
    }
    write_tests(&mut text, tool.tests())?;
    Ok(text)
}

/// The tests the tool declares, one line each in the shape they are declared in (an omitted
/// `expect` is its default, `"success"`), for `toolsmith test NAME` to run.
fn write_tests(text: &mut String, tests: &[TestCase]) -> std::fmt::Result {
    let header = Paint::Header.paint("tests:");
    if tests.is_empty() {
        return writeln!(text, "{header} none");
    }
    writeln!(text, "{header}")?;
    for (index, case) in tests.iter().enumerate() {
        writeln!(
            text,
            "  {}: input {}, expect {}",
            case.display_name(index),
            serde_json::Value::Object(case.input.clone()),
            case.expect.to_json()
        )?;
    }
    Ok(())
}

/// Secret names as JSON strings.
fn secret_names(names: &[SecretName]) -> Vec<&str> {
    names.iter().map(SecretName::as_str).collect()
}

/// The row of the secrets a call of `tool` receives and those it declares (names only), or
/// none when it has neither.
fn secrets_row(tool: &Tool, call: &CallConfig) -> Option<Vec<Cell>> {
    let declared = &tool.sandbox().secrets;
    if call.secrets.is_empty() && declared.is_empty() {
        return None;
    }
    let granted = if call.secrets.is_empty() {
        "none granted".to_owned()
    } else {
        format!("granted {}", secret_names(&call.secrets).join(", "))
    };
    let missing: Vec<&str> = declared
        .iter()
        .filter(|name| !call.secrets.contains(name))
        .map(SecretName::as_str)
        .collect();
    let declared_text = if declared.is_empty() {
        String::new()
    } else {
        format!(" (the tool declares {})", secret_names(declared).join(", "))
    };
    let text = format!("{granted}{declared_text}");
    Some(vec![
        Cell::painted("secrets:", Paint::Header),
        if missing.is_empty() {
            Cell::plain(text)
        } else {
            Cell::painted(
                format!(
                    "{text}; calls are refused until the user config has [tools.{}] secrets = [{}]",
                    tool.name(),
                    missing
                        .iter()
                        .map(|name| format!("\"{name}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Paint::Bad,
            )
        },
    ])
}

/// The rows of the sandbox a call of `tool` gets, and of what this kernel enforces of it.
fn sandbox_rows(tool: &Tool, call: &CallConfig, features: &Features) -> Vec<Vec<Cell>> {
    let label = |text: &str| Cell::painted(text, Paint::Header);
    let mut rows = Vec::new();
    let declared = tool.sandbox();
    let declared = [
        declared
            .network
            .as_ref()
            .map(|setting| format!("network {setting}")),
        declared
            .filesystem
            .as_ref()
            .map(|setting| format!("filesystem {setting}")),
        (!declared.read_hide.is_empty())
            .then(|| format!("read_hide {}", paths(&declared.read_hide))),
        (!declared.read_reveal.is_empty())
            .then(|| format!("read_reveal {}", paths(&declared.read_reveal))),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let declared = if declared.is_empty() {
        String::new()
    } else {
        format!(" (the tool declares {})", declared.join(", "))
    };
    rows.push(vec![
        label("sandbox:"),
        Cell::plain(format!(
            "network {}, filesystem {}, syscalls {}{}{declared}",
            call.sandbox.network,
            call.sandbox.filesystem,
            call.sandbox.syscalls,
            call.sandbox
                .user
                .map(|user| format!(", user {user}"))
                .unwrap_or_default()
        )),
    ]);
    if let Err(denied) = &call.hidden {
        rows.push(vec![
            label("read masks:"),
            Cell::painted(format!("calls are POLICY_DENIED: {denied}"), Paint::Bad),
        ]);
    }
    if !call.denied.is_empty() {
        let lines: Vec<&str> = call
            .denied
            .iter()
            .map(|denial| denial.grant.as_str())
            .collect();
        rows.push(vec![
            label("refused:"),
            Cell::painted(
                format!(
                    "a call is POLICY_DENIED: the tool declares what the operator does not grant; add {}",
                    lines.join("; ")
                ),
                Paint::Bad,
            ),
        ]);
    }
    let (applied, missing) = isolation(features, call);
    rows.push(vec![
        label("isolation:"),
        if missing.is_empty() {
            Cell::plain(applied.join(", "))
        } else {
            Cell::painted(
                format!(
                    "{} (not enforced on this kernel: {})",
                    applied.join(", "),
                    missing.join("; ")
                ),
                Paint::Bad,
            )
        },
    ]);
    rows
}

/// Paths as one comma-separated list.
fn paths(list: &[std::path::PathBuf]) -> String {
    list.iter()
        .map(|path| path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn write_indented(text: &mut String, value: &serde_json::Value) -> std::fmt::Result {
    let pretty = serde_json::to_string_pretty(value).map_err(|_| std::fmt::Error)?;
    for line in pretty.lines() {
        writeln!(text, "  {line}")?;
    }
    Ok(())
}
