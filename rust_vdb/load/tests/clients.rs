//! The load client against small servers of this file's own: answers land at the right
//! positions, failures are counted with their reason, inserts are summed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use vdb_load::{bulk_insert, run_queries, LoadError, NullServer, QueryPlan};

/// A server whose /search returns the query's own first component as the id of every hit
/// (and 500 for a negative one), and whose /bulk_insert counts the vectors it got.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = stream.try_clone().unwrap();
                let mut r = BufReader::new(stream);
                loop {
                    let (mut path, mut len, mut line) = (String::new(), 0usize, String::new());
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if path.is_empty() {
                            path = l.split(' ').nth(1).unwrap_or("").to_string();
                        } else if let Some((k, v)) = l.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                len = v.trim().parse().unwrap();
                            }
                        }
                    }
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).unwrap();
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    let (status, answer) = if path == "/bulk_insert" {
                        let n = v["vectors"].as_array().unwrap().len();
                        ("200 OK", format!(r#"{{"status":"ok","inserted":{n}}}"#))
                    } else {
                        let first = v["vector"][0].as_f64().unwrap();
                        let k = v["top_k"].as_u64().unwrap();
                        if first < 0.0 {
                            ("500 Internal Server Error", r#"{"error":"negative"}"#.to_string())
                        } else {
                            let hits: Vec<String> = (0..k)
                                .map(|j| format!(r#"{{"id":{},"distance":{j}}}"#, first as u64))
                                .collect();
                            ("200 OK", format!(r#"{{"results":[{}]}}"#, hits.join(",")))
                        }
                    };
                    let msg = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    out.write_all(msg.as_bytes()).unwrap();
                }
            });
        }
    });
    port
}

fn no_interrupt() -> Result<(), LoadError> {
    Ok(())
}

#[test]
fn answers_land_at_their_positions_of_the_order() {
    let port = echo_server();
    let url = format!("http://127.0.0.1:{port}");
    let dim = 3;
    let queries: Vec<f32> = (0..20).flat_map(|r| [r as f32 * 10.0, 0.5, 0.25]).collect();
    let order: Vec<usize> = (0..20).rev().chain([3, 3, 7]).collect();
    let plan = QueryPlan {
        url: &url,
        queries: &queries,
        dim,
        top_k: 4,
        clients: 3,
        warmup: 5,
        order: &order,
        timeout: Duration::from_secs(10),
    };
    let run = run_queries(&plan, &no_interrupt).unwrap();
    assert_eq!(run.errors, 0, "{:?}", run.first_error);
    for (pos, &r) in order.iter().enumerate() {
        assert_eq!(&run.ids[pos * 4..pos * 4 + 4], &[r as i64 * 10; 4]);
        assert_eq!(run.distances[pos * 4 + 3], 3.0);
        assert!(run.latency_s[pos] > 0.0);
    }
    assert!(run.wall_s > 0.0);
}

#[test]
fn failed_requests_are_counted_with_the_reason() {
    let port = echo_server();
    let url = format!("http://127.0.0.1:{port}");
    let queries = [1.0f32, -1.0, 2.0];
    let plan = QueryPlan {
        url: &url,
        queries: &queries,
        dim: 1,
        top_k: 10,
        clients: 2,
        warmup: 0,
        order: &[0, 1, 2, 1],
        timeout: Duration::from_secs(10),
    };
    let run = run_queries(&plan, &no_interrupt).unwrap();
    assert_eq!(run.errors, 2);
    assert!(run.first_error.unwrap().contains("HTTP 500"));
    assert_eq!(&run.ids[10..20], &[-1; 10]);
    assert!(run.latency_s[1].is_nan());
    assert_eq!(run.ids[0], 1);
}

#[test]
fn a_server_that_is_not_there_is_a_transport_error_per_request() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let plan = QueryPlan {
        url: &url,
        queries: &[0.0, 1.0],
        dim: 2,
        top_k: 10,
        clients: 1,
        warmup: 0,
        order: &[0, 0],
        timeout: Duration::from_secs(5),
    };
    let run = run_queries(&plan, &no_interrupt).unwrap();
    assert_eq!(run.errors, 2);
    let ids = [0u64];
    let err = bulk_insert(&url, &[0.0, 1.0], 2, &ids, 10, Duration::from_secs(5), &mut |_| Ok(())).unwrap_err();
    assert!(matches!(err, LoadError::Transport { .. }), "{err}");
}

#[test]
fn bulk_insert_sums_the_servers_counts_batch_by_batch() {
    let port = echo_server();
    let url = format!("http://127.0.0.1:{port}");
    let vectors: Vec<f32> = (0..25 * 2).map(|v| v as f32).collect();
    let ids: Vec<u64> = (0..25).collect();
    let mut progress = Vec::new();
    let n = bulk_insert(&url, &vectors, 2, &ids, 10, Duration::from_secs(5), &mut |s| {
        progress.push(s);
        Ok(())
    })
    .unwrap();
    assert_eq!(n, 25);
    assert_eq!(progress, vec![10, 20, 25]);
    let bad = bulk_insert(&url, &vectors[..7], 2, &ids, 10, Duration::from_secs(5), &mut |_| Ok(()));
    assert!(matches!(bad, Err(LoadError::Invalid(_))));
}

#[test]
fn an_interrupt_stops_the_clients() {
    let mut null = NullServer::start(0).unwrap();
    let url = format!("http://127.0.0.1:{}", null.port());
    let order = vec![0usize; 2_000_000];
    let plan = QueryPlan {
        url: &url,
        queries: &[0.5; 8],
        dim: 8,
        top_k: 10,
        clients: 2,
        warmup: 0,
        order: &order,
        timeout: Duration::from_secs(5),
    };
    let t0 = std::time::Instant::now();
    let stop = || {
        if t0.elapsed() > Duration::from_millis(200) {
            Err(LoadError::Interrupted)
        } else {
            Ok(())
        }
    };
    assert!(matches!(run_queries(&plan, &stop), Err(LoadError::Interrupted)));
    null.stop();
}

#[test]
fn the_null_server_answers_ten_hits_on_a_kept_connection() {
    let mut null = NullServer::start(0).unwrap();
    let url = format!("http://127.0.0.1:{}", null.port());
    let order: Vec<usize> = (0..200).map(|i| i % 2).collect();
    let plan = QueryPlan {
        url: &url,
        queries: &[0.5; 16],
        dim: 8,
        top_k: 10,
        clients: 4,
        warmup: 2,
        order: &order,
        timeout: Duration::from_secs(5),
    };
    let run = run_queries(&plan, &no_interrupt).unwrap();
    assert_eq!(run.errors, 0, "{:?}", run.first_error);
    assert_eq!(&run.ids[..10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    null.stop();
}
