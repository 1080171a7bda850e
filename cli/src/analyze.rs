use anyhow::Result;
#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {}
pub fn analyze(_a: &AnalyzeArgs) -> Result<i32> {
    Ok(0)
}
