//! toolsmith's tools in a rig tool set: [`toolbox`] discovers a directory and calls its tools
//! through toolsmith; [`to_rig`] makes each of them a rig `DynamicTool` and puts them all in a
//! rig `ToolSet`. `src/main.rs` is the program that shows it without a model.

pub mod to_rig;
pub mod toolbox;
