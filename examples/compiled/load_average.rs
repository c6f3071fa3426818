//! A compiled tool in Rust, with no dependency: the Kodelet protocol.
//!
//! `load_average description` prints the description; `load_average run`
//! reads the (empty) arguments on stdin and prints the system's load averages
//! from /proc/loadavg as JSON. Build it with
//! `rustc -O -o examples/tools/load_average examples/compiled/load_average.rs`.

use std::io::Read;
use std::process::ExitCode;

const DESCRIPTION: &str = r#"{
  "name": "load_average",
  "description": "The system load averages over 1, 5 and 15 minutes, and the number of runnable processes",
  "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}
}"#;

fn run() -> Result<String, String> {
    // The arguments are validated by toolsmith before the tool starts; this tool takes none.
    let mut arguments = String::new();
    std::io::stdin()
        .read_to_string(&mut arguments)
        .map_err(|error| format!("cannot read the arguments: {error}"))?;
    let text = std::fs::read_to_string("/proc/loadavg")
        .map_err(|error| format!("cannot read /proc/loadavg: {error}"))?;
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [one, five, fifteen, tasks, ..] = fields.as_slice() else {
        return Err(format!("unexpected /proc/loadavg: {text:?}"));
    };
    let runnable = tasks.split('/').next().unwrap_or("0");
    Ok(format!(
        r#"{{"one_minute": {one}, "five_minutes": {five}, "fifteen_minutes": {fifteen}, "runnable": {runnable}}}"#
    ))
}

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("description") => {
            println!("{DESCRIPTION}");
            ExitCode::SUCCESS
        }
        Some("run") => match run() {
            Ok(result) => {
                println!("{result}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                // A JSON {"error": ...} on stdout with a non-zero exit becomes the envelope's error.
                println!(r#"{{"error": {error:?}}}"#);
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: load_average description|run");
            ExitCode::from(2)
        }
    }
}
