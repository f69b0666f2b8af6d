//! The history page's server function.

use super::*;
use crate::model::History;
#[cfg(feature = "ssr")]
use crate::model::HistoryWindow;

/// The caller's scheduling history over `window` (`hour`, `day` or `week`; empty: the hour).
#[server(prefix = "/_sf", endpoint = "scheduling/history")]
pub async fn load_history(window: String) -> Result<History, AppError> {
    ctx::reading(move |c| async move {
        let window = HistoryWindow::parse(Some(&window))?;
        c.backend.scheduling_history(&c.principal, window).await
    })
    .await
}
