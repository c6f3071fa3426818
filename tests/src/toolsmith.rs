//! A copy of the `toolsmith` binary, so that the black-box tests get `CARGO_BIN_EXE_toolsmith-dup`.

fn main() -> std::process::ExitCode {
    toolsmith_cli::main()
}
