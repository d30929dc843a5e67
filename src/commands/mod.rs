//! One module per subcommand: glue that turns a Config into a Plan, applies it and reports.

pub mod audit;
pub mod validate;
