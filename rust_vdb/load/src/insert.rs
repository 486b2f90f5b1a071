//! `POST /bulk_insert` in batches, one connection, as the seed harness loads a server.

use std::time::Duration;

use crate::api::{endpoint, BulkInsert, BulkInsertAnswer, InsertItem};
use crate::error::{snippet, LoadError};

/// An agent with one kept-alive connection, no proxy, `timeout` per request.
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(timeout)
        .max_idle_connections_per_host(1)
        .no_delay(true)
        .build()
}

/// Sends `body` to `url`; the answer's body on 2xx, else the error that says what happened.
pub(crate) fn post(agent: &ureq::Agent, url: &str, body: &[u8]) -> Result<String, LoadError> {
    match agent
        .post(url)
        .set("Content-Type", "application/json")
        .send_bytes(body)
    {
        Ok(resp) => resp.into_string().map_err(|e| LoadError::Transport {
            endpoint: url.to_string(),
            message: format!("reading the answer: {e}"),
        }),
        Err(ureq::Error::Status(status, resp)) => Err(LoadError::Status {
            endpoint: url.to_string(),
            status,
            body: snippet(&resp.into_string().unwrap_or_default()),
        }),
        Err(ureq::Error::Transport(t)) => Err(LoadError::Transport {
            endpoint: url.to_string(),
            message: t.to_string(),
        }),
    }
}

/// Inserts the `ids.len()` rows of `vectors` (row-major, `dim` columns) in batches of `batch`.
/// `after_batch(rows_sent_so_far)` runs after each batch; an error from it stops the load.
/// Returns the sum of the server's `inserted` counts.
pub fn bulk_insert(
    url: &str,
    vectors: &[f32],
    dim: usize,
    ids: &[u64],
    batch: usize,
    timeout: Duration,
    after_batch: &mut dyn FnMut(usize) -> Result<(), LoadError>,
) -> Result<u64, LoadError> {
    if dim == 0 || batch == 0 {
        return Err(LoadError::Invalid(format!(
            "dim and batch must be >= 1, got dim={dim} batch={batch}"
        )));
    }
    if vectors.len() != ids.len() * dim {
        return Err(LoadError::Invalid(format!(
            "{} values are not {} vectors of dim {dim}",
            vectors.len(),
            ids.len()
        )));
    }
    let url = endpoint(url, "bulk_insert");
    let agent = agent(timeout);
    let mut inserted = 0u64;
    let mut sent = 0usize;
    for (rows, chunk_ids) in vectors.chunks(batch * dim).zip(ids.chunks(batch)) {
        let body = BulkInsert {
            vectors: chunk_ids
                .iter()
                .zip(rows.chunks_exact(dim))
                .map(|(&id, vector)| InsertItem { id, vector })
                .collect(),
        };
        let body = serde_json::to_vec(&body).map_err(|e| LoadError::Invalid(e.to_string()))?;
        let answer = post(&agent, &url, &body)?;
        let parsed: BulkInsertAnswer =
            serde_json::from_str(&answer).map_err(|e| LoadError::Protocol {
                endpoint: url.clone(),
                message: format!("{e} in {}", snippet(&answer)),
            })?;
        inserted += parsed.inserted;
        sent += chunk_ids.len();
        after_batch(sent)?;
    }
    Ok(inserted)
}
