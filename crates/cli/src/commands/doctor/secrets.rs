//! The `[secrets.NAME]` checks of `toolsmith doctor`: each defined secret, its source kind, the tools that receive it, and whether its source can be read now; never a value.

use std::sync::Arc;

use toolsmith_executor::Executor;
use toolsmith_registry::{Catalog, RunConfig, SecretName, error_chain};

use crate::commands::doctor::{Check, Status};
use crate::settings::GlobalSettings;

/// One check per defined secret (its source read once, the value dropped at once), then one
/// per tool that declares a secret it is not granted.
pub(super) async fn secret_checks(
    global: &GlobalSettings,
    executor: &Arc<Executor>,
    catalog: &Catalog,
    config: &RunConfig,
) -> Vec<Check> {
    let mut checks = Vec::new();
    for (name, source) in global.secrets.defined() {
        let granted: Vec<String> = global
            .tools
            .iter()
            .filter(|(_, tool)| {
                tool.secrets
                    .as_ref()
                    .is_some_and(|names| names.contains(name))
            })
            .map(|(tool, _)| tool.as_str().to_owned())
            .collect();
        let to = if granted.is_empty() {
            "granted to no tool".to_owned()
        } else {
            format!("granted to {}", granted.join(", "))
        };
        let read = global.secrets.read(executor, name, &global.cwd).await;
        let (status, detail, fix) = match read {
            Ok(_value) => (
                Status::Ok,
                format!("{}: {to}; readable", source.describe()),
                None,
            ),
            Err(error) => (
                Status::Problem,
                format!("{}: {to}; {}", source.describe(), error_chain(&error)),
                Some(format!(
                    "make the {} source of [secrets.{name}] readable: calls of the tools granted it fail until it is",
                    source.kind()
                )),
            ),
        };
        checks.push(Check {
            name: format!("secrets.{name}"),
            status,
            detail,
            fix,
        });
    }
    for tool in catalog.tools() {
        let granted = config.granted_secrets(tool);
        let missing: Vec<&SecretName> = tool
            .sandbox()
            .secrets
            .iter()
            .filter(|name| !granted.contains(name))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let names: Vec<String> = missing.iter().map(|name| format!("\"{name}\"")).collect();
        checks.push(Check {
            name: tool.name().as_str().to_owned(),
            status: Status::Warn,
            detail: format!(
                "declares secrets it is not granted ({}): its calls are refused",
                names.join(", ")
            ),
            fix: (!tool.generated()).then(|| {
                format!(
                    "add [tools.{}] secrets = [{}] to the user config",
                    tool.name(),
                    names.join(", ")
                )
            }),
        });
    }
    checks
}
