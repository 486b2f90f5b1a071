//! The routes end to end through the router (tower `oneshot`), and one real listener.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use vdb_core::rng::Rng;
use vdb_serve::{router, Engine, SearchFlags, ServeConfig, ServerHandle};

const DIM: usize = 16;

/// `n` clustered vectors of DIM integer values (ids 0..n).
fn data(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    let centres: Vec<Vec<f32>> = (0..20)
        .map(|_| (0..DIM).map(|_| (rng.below(200)) as f32).collect())
        .collect();
    (0..n)
        .map(|_| {
            let c = &centres[rng.below(centres.len())];
            c.iter().map(|&v| v + rng.below(21) as f32 - 10.0).collect()
        })
        .collect()
}

fn app(cfg: ServeConfig) -> (Router, Arc<Engine>) {
    let engine = Arc::new(Engine::new(cfg).unwrap());
    (router(engine.clone()), engine)
}

async fn call(app: &Router, method: &str, path: &str, body: Option<String>) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map_or(Body::empty(), Body::from))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
    (status, v)
}

async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    call(app, "POST", path, Some(body.to_string())).await
}

async fn bulk(app: &Router, vectors: &[Vec<f32>], first_id: u64) -> (StatusCode, Value) {
    let items: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"id": first_id + i as u64, "vector": v}))
        .collect();
    post(app, "/bulk_insert", json!({ "vectors": items })).await
}

/// Asserts a 4xx/5xx with an "error" message containing `needle`.
fn refused(got: (StatusCode, Value), status: StatusCode, needle: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    let msg = got.1["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {}", got.1));
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
}

/// A fresh folder of this test's own, the index file in it (not yet there), and a config that
/// starts from / saves to that file.
fn saving_to(tag: &str) -> (std::path::PathBuf, std::path::PathBuf, ServeConfig) {
    let dir = std::env::temp_dir().join(format!("vdb-serve-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("served.ivf");
    let _ = std::fs::remove_file(&path);
    let cfg = ServeConfig {
        index: Some(path.clone()),
        ..ServeConfig::default()
    };
    (dir, path, cfg)
}

fn search_body(v: &[f32], k: u64) -> Value {
    json!({"vector": v, "top_k": k})
}

#[tokio::test]
async fn endpoints_answer_as_the_harness_expects() {
    let (app, _) = app(ServeConfig::default());
    let (s, v) = call(&app, "GET", "/health", None).await;
    assert_eq!((s, v["state"].as_str()), (StatusCode::OK, Some("empty")));
    let xs = data(1500, 1);
    let (s, v) = post(&app, "/insert", json!({"id": 0, "vector": xs[0]})).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "ok"})));
    let (s, v) = bulk(&app, &xs[1..], 1).await;
    assert_eq!(
        (s, v),
        (StatusCode::OK, json!({"status": "ok", "inserted": 1499}))
    );
    let (_, st) = call(&app, "GET", "/stats", None).await;
    assert_eq!(st["state"], "buffering");
    assert_eq!(st["vectors"], 1500);
    assert_eq!(st["dim"], DIM);
    let (s, r) = post(&app, "/search", search_body(&xs[7], 10)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let hits = r["results"].as_array().unwrap();
    assert_eq!(hits.len(), 10);
    assert_eq!(hits[0]["id"], 7);
    assert_eq!(hits[0]["distance"], 0.0);
    let d: Vec<f64> = hits
        .iter()
        .map(|h| h["distance"].as_f64().unwrap())
        .collect();
    assert!(d.windows(2).all(|w| w[0] <= w[1]), "not best first: {d:?}");
    let (_, st) = call(&app, "GET", "/stats", None).await;
    assert_eq!(st["state"], "ready");
    assert_eq!(st["nlist"], vdb_core::defaults::default_nlist(1500));
    assert_eq!(st["queries"], 1);
    assert_eq!(st["builds"], 1);
    assert!(st["build"]["train_s"].as_f64().unwrap() >= 0.0);
    assert!(st["simd"].as_str().unwrap().len() > 1);
    assert_eq!(st["search"]["threads"], 1);
    // POST /build on a ready index answers its stats.
    let (s, b) = post(&app, "/build", json!({})).await;
    assert_eq!((s, &b["state"]), (StatusCode::OK, &json!("ready")));
}

#[tokio::test]
async fn bad_input_is_a_json_4xx_and_the_server_goes_on() {
    let cfg = ServeConfig {
        max_body_bytes: 4096,
        ..ServeConfig::default()
    };
    let (app, engine) = app(cfg);
    let xs = data(600, 2);
    let q = xs[3].clone();
    refused(
        post(&app, "/search", search_body(&q, 5)).await,
        StatusCode::CONFLICT,
        "no vectors inserted",
    );
    refused(
        post(&app, "/build", json!({})).await,
        StatusCode::CONFLICT,
        "no vectors inserted",
    );
    for chunk in (0..600).step_by(20) {
        assert_eq!(
            bulk(&app, &xs[chunk..chunk + 20], chunk as u64).await.0,
            StatusCode::OK
        );
    }
    let bad = [
        (
            call(&app, "POST", "/search", Some("{\"vector\": [1, 2".into())).await,
            StatusCode::BAD_REQUEST,
            "invalid JSON",
        ),
        (
            call(
                &app,
                "POST",
                "/search",
                Some("{\"vector\": [NaN], \"top_k\": 1}".into()),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid JSON",
        ),
        (
            post(&app, "/search", json!({"vector": "x", "top_k": 1})).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid type",
        ),
        (
            post(&app, "/search", json!({"vector": q})).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "top_k",
        ),
        (
            post(&app, "/search", json!({"vector": q, "top_k": -1})).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid value",
        ),
        (
            post(&app, "/insert", json!({"id": 1.5, "vector": q})).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid type",
        ),
        (
            post(&app, "/insert", json!({"id": 9000, "vector": [1.0, 2.0]})).await,
            StatusCode::BAD_REQUEST,
            "dim 16",
        ),
        (
            post(&app, "/search", search_body(&[1.0, 2.0], 5)).await,
            StatusCode::BAD_REQUEST,
            "dim 16",
        ),
        (
            call(
                &app,
                "POST",
                "/insert",
                Some(format!(
                    "{{\"id\": 9001, \"vector\": [1e39{}]}}",
                    ", 0".repeat(DIM - 1)
                )),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "finite",
        ),
        (
            post(
                &app,
                "/insert",
                json!({"id": 9002, "vector": vec![70000.0; DIM]}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "65504",
        ),
        (
            post(&app, "/search", search_body(&q, 0)).await,
            StatusCode::BAD_REQUEST,
            "top_k=0",
        ),
        (
            post(&app, "/search", search_body(&q, 601)).await,
            StatusCode::BAD_REQUEST,
            "top_k=601",
        ),
        (
            post(&app, "/insert", json!({"id": 5, "vector": q})).await,
            StatusCode::CONFLICT,
            "id 5 was inserted before",
        ),
        (
            post(
                &app,
                "/bulk_insert",
                json!({"vectors": [{"id": 9003, "vector": q}, {"id": 9003, "vector": q}]}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "given twice",
        ),
        (
            post(
                &app,
                "/insert",
                json!({"id": 9223372036854775808u64, "vector": q}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "above the largest id",
        ),
        (
            bulk(&app, &xs[..40], 10_000).await,
            StatusCode::PAYLOAD_TOO_LARGE,
            "limit of 4096 bytes",
        ),
        (
            call(&app, "GET", "/nowhere", None).await,
            StatusCode::NOT_FOUND,
            "no route",
        ),
        (
            call(&app, "GET", "/search", None).await,
            StatusCode::METHOD_NOT_ALLOWED,
            "not allowed",
        ),
    ];
    let n_bad = bad.len() as u64;
    for (got, status, needle) in bad {
        refused(got, status, needle);
    }
    // Nothing of the refused requests was kept: 9003 is free, the 600 are all there; no
    // refused search started the build.
    assert_eq!(engine.held(), 600);
    assert_eq!(
        (engine.stats().builds, engine.phase()),
        (0, vdb_serve::Phase::Buffering)
    );
    assert_eq!(
        post(&app, "/insert", json!({"id": 9003, "vector": q}))
            .await
            .0,
        StatusCode::OK
    );
    let (s, r) = post(&app, "/search", search_body(&q, 3)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, st) = call(&app, "GET", "/stats", None).await;
    assert_eq!(st["rejected"], n_bad + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_searches_build_once_and_inserts_after_are_found() {
    let (app, engine) = app(ServeConfig::default());
    let xs = data(2000, 3);
    assert_eq!(bulk(&app, &xs, 0).await.0, StatusCode::OK);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let app = app.clone();
            let q = xs[i * 100].clone();
            tokio::spawn(async move { post(&app, "/search", search_body(&q, 5)).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let (s, r) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK, "{r}");
        assert_eq!(r["results"][0]["id"], (i * 100) as u64);
    }
    assert_eq!(engine.stats().builds, 1);
    // A new vector after the build goes to its list and is found.
    let far: Vec<f32> = (0..DIM).map(|j| 1000.0 + j as f32).collect();
    assert_eq!(
        post(&app, "/insert", json!({"id": 123456, "vector": far}))
            .await
            .0,
        StatusCode::OK
    );
    let (s, r) = post(&app, "/search", search_body(&far, 1)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["results"], json!([{"id": 123456, "distance": 0.0}]));
    refused(
        post(&app, "/insert", json!({"id": 123456, "vector": far})).await,
        StatusCode::CONFLICT,
        "inserted before",
    );
    assert_eq!(engine.stats().indexed, 2001);
}

#[tokio::test]
async fn saved_index_restarts_ready_with_the_same_results() {
    let (dir, path, cfg) = saving_to("test");
    let (a, _) = app(cfg.clone());
    let xs = data(1200, 4);
    assert_eq!(bulk(&a, &xs, 50).await.0, StatusCode::OK);
    assert_eq!(post(&a, "/build", json!({})).await.0, StatusCode::OK);
    assert!(path.exists());
    let (b, engine) = app(cfg);
    assert_eq!(engine.stats().indexed, 1200);
    for q in xs.iter().step_by(97) {
        assert_eq!(
            post(&a, "/search", search_body(q, 10)).await,
            post(&b, "/search", search_body(q, 10)).await
        );
    }
    refused(
        post(&b, "/insert", json!({"id": 60, "vector": xs[0]})).await,
        StatusCode::CONFLICT,
        "inserted before",
    );
    assert_eq!(
        post(&b, "/insert", json!({"id": 7, "vector": xs[0]}))
            .await
            .0,
        StatusCode::OK
    );
    // A recall target on a saved index is measured on the vectors the file holds.
    let tuned = Engine::new(ServeConfig {
        index: Some(path.clone()),
        recall_target: Some(0.9),
        ..ServeConfig::default()
    })
    .unwrap();
    let stats = serde_json::to_value(tuned.stats()).unwrap();
    let tune = &stats["build"]["tune"];
    assert_eq!(tune["queries"], 500, "{stats}");
    assert!(tune["sample_recall"].as_f64().unwrap() >= 0.905, "{stats}");
    let nprobe = &stats["search"]["nprobe"];
    assert!(
        tune["tried"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| &t[0] == nprobe),
        "{stats}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn recall_target_picks_settings_that_reach_it() {
    let cfg = ServeConfig {
        recall_target: Some(0.9),
        ..ServeConfig::default()
    };
    let (app, engine) = app(cfg);
    let xs = data(3000, 5);
    assert_eq!(bulk(&app, &xs, 0).await.0, StatusCode::OK);
    assert_eq!(post(&app, "/build", json!({})).await.0, StatusCode::OK);
    let st = engine.stats();
    let t = st.build.tune.as_ref().unwrap();
    assert!(t.target_met);
    assert!(t.sample_recall >= 0.905, "{}", t.sample_recall);
    assert_eq!(t.queries, 500);
    let s = st.search.unwrap();
    // The smallest nprobe that reached it: one fewer list fell short with the same settings.
    assert!(t.tried.iter().any(|x| (x.0, x.1) == (s.nprobe, s.reorder)));
    if s.nprobe > 1 {
        let below = t
            .tried
            .iter()
            .find(|x| x.0 == s.nprobe - 1 && x.1 == s.reorder)
            .unwrap();
        assert!(below.3 < 0.905);
    }
}

#[tokio::test]
async fn bad_flags_are_refused_before_starting() {
    for (cfg, needle) in [
        (
            ServeConfig {
                recall_target: Some(1.5),
                ..ServeConfig::default()
            },
            "recall_target",
        ),
        (
            ServeConfig {
                dim: Some(6),
                search: SearchFlags {
                    reorder: Some(100),
                    ..SearchFlags::default()
                },
                ..ServeConfig::default()
            },
            "multiple of 4",
        ),
        (
            ServeConfig {
                search: SearchFlags {
                    probe_ratio: Some(0.5),
                    ..SearchFlags::default()
                },
                ..ServeConfig::default()
            },
            "probe_ratio",
        ),
    ] {
        assert!(Engine::new(cfg).err().unwrap().to_string().contains(needle));
    }
    let (app, _) = app(ServeConfig {
        nlist: Some(100),
        ..ServeConfig::default()
    });
    assert_eq!(bulk(&app, &data(50, 6), 0).await.0, StatusCode::OK);
    refused(
        post(&app, "/build", json!({})).await,
        StatusCode::CONFLICT,
        "needs at least 100 vectors",
    );
    // Still buffering, nothing lost: more vectors and the build goes through.
    assert_eq!(bulk(&app, &data(100, 7), 50).await.0, StatusCode::OK);
    let (s, st) = post(&app, "/build", json!({})).await;
    assert_eq!((s, &st["indexed"]), (StatusCode::OK, &json!(150)));
}

#[test]
fn a_real_listener_serves_and_stops() {
    use std::io::{Read, Write};
    let mut server = ServerHandle::start(ServeConfig {
        port: 0,
        ..ServeConfig::default()
    })
    .unwrap();
    let mut conn = std::net::TcpStream::connect(server.addr()).unwrap();
    conn.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"status\":\"ok\""), "{text}");
    assert!(!server.wait(Some(std::time::Duration::from_millis(10))));
    server.stop().unwrap();
    assert!(server.is_stopped());
    assert!(std::net::TcpStream::connect(server.addr()).is_err());
}

#[tokio::test]
async fn a_panicking_handler_answers_500_json_and_the_server_goes_on() {
    let engine = Arc::new(Engine::new(ServeConfig::default()).unwrap());
    let routes = Router::new()
        .route(
            "/panic",
            axum::routing::get(|| async { panic!("boom") as &str }),
        )
        .route(
            "/health",
            axum::routing::get(|| async { axum::Json(json!({"status": "ok"})) }),
        );
    let app = vdb_serve::routes::guarded(routes, engine);
    refused(
        call(&app, "GET", "/panic", None).await,
        StatusCode::INTERNAL_SERVER_ERROR,
        "boom",
    );
    assert_eq!(call(&app, "GET", "/health", None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn top_k_results_even_when_the_probed_lists_hold_fewer() {
    // Five vectors in four lists: the lists one query probes hold fewer than five rows.
    let (app, engine) = app(ServeConfig {
        nlist: Some(4),
        ..ServeConfig::default()
    });
    let xs = data(5, 8);
    assert_eq!(bulk(&app, &xs, 0).await.0, StatusCode::OK);
    let (s, r) = post(&app, "/search", search_body(&xs[0], 5)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let mut ids: Vec<u64> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids[0], 0);
    ids.sort();
    assert_eq!(ids, [0, 1, 2, 3, 4]);
    assert_eq!(engine.stats().widened, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_racing_the_build_all_land_in_the_index() {
    let (app, engine) = app(ServeConfig::default());
    let xs = data(3000, 9);
    assert_eq!(bulk(&app, &xs, 0).await.0, StatusCode::OK);
    let building = {
        let app = app.clone();
        tokio::spawn(async move { post(&app, "/build", json!({})).await })
    };
    // Whether each lands in the buffer the build drains or in the ready index, it is kept.
    let extra = data(40, 10);
    for (i, v) in extra.iter().enumerate() {
        let (s, r) = post(&app, "/insert", json!({"id": 10_000 + i, "vector": v})).await;
        assert_eq!(s, StatusCode::OK, "{r}");
    }
    assert_eq!(building.await.unwrap().0, StatusCode::OK);
    assert_eq!((engine.stats().indexed, engine.stats().buffered), (3040, 0));
    for v in &extra {
        let (_, r) = post(&app, "/search", search_body(v, 1)).await;
        assert_eq!(r["results"][0]["distance"], 0.0, "{r}");
    }
}

#[tokio::test]
async fn inserts_after_the_build_are_saved_back_to_the_index_file() {
    let (dir, _, cfg) = saving_to("resave");
    let (a, engine) = app(cfg.clone());
    // buffered, never built: nothing to save, and said so
    let xs = data(1300, 5);
    assert_eq!(bulk(&a, &xs[..1200], 0).await.0, StatusCode::OK);
    assert!(matches!(
        engine.save_added(),
        Some(vdb_serve::engine::SaveAtStop::NotBuilt(_))
    ));
    assert_eq!(post(&a, "/build", json!({})).await.0, StatusCode::OK);
    assert_eq!(engine.save_added(), None, "the build saved it; nothing new");
    assert_eq!(bulk(&a, &xs[1200..], 1200).await.0, StatusCode::OK);
    assert!(matches!(
        engine.save_added(),
        Some(vdb_serve::engine::SaveAtStop::Saved(_))
    ));
    assert_eq!(engine.save_added(), None);
    let (b, reloaded) = app(cfg);
    assert_eq!(reloaded.stats().indexed, 1300);
    let q = &xs[1250];
    assert_eq!(
        post(&a, "/search", search_body(q, 5)).await,
        post(&b, "/search", search_body(q, 5)).await
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
