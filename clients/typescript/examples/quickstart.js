// @ts-check
// A tour of @idgen/client against a running idgen: Snowflake IDs, the parts
// of one, a stream, and a namespace's counter.
//
//   idgen serve &                         # 127.0.0.1:8080, SQLite in ./idgen.db
//   node examples/quickstart.js           # from clients/typescript, after npm run build
//
// IDGEN_URL     the node (default http://127.0.0.1:8080)
// IDGEN_TOKEN   a token with the ids scope, when the node has a tokens file
// IDGEN_NAMESPACE  a namespace to draw from (idgen namespaces create NAME); none by default

import { IdgenClient, IdgenError, countIds } from "@idgen/client";

const idgen = new IdgenClient({
  baseUrl: process.env.IDGEN_URL || "http://127.0.0.1:8080",
  token: process.env.IDGEN_TOKEN || undefined,
  protocol: "grpc",
  maxAttempts: 2, // a demo should fail fast when no idgen answers
});

try {
  // Three Snowflake IDs, as bigint; String(id) is the decimal form.
  const { ids, fence } = await idgen.nextIds({ count: 3 });
  console.log("snowflake ids:", ids.map(String).join(" "));
  if (fence?.kind === "lease") {
    console.log(`issued under worker ${fence.worker} of datacenter ${fence.datacenter}, fencing version ${fence.fencingVersion}`);
  }

  // The parts of the first one.
  const first = ids[0];
  if (first !== undefined) {
    const p = await idgen.parse(first);
    console.log(`parsed ${p.id}: time ${p.time.toISOString()}, worker ${p.worker}, sequence ${p.sequence}`);
  }

  // A stream of 100,000 IDs in batches of 10,000, counted from their ranges
  // without making a bigint per ID.
  let streamed = 0n;
  let batches = 0;
  for await (const batch of idgen.streamIds({ batchSize: 10_000, total: 100_000 })) {
    streamed += countIds(batch.ranges);
    batches++;
  }
  console.log(`streamed ${streamed} ids in ${batches} batches`);

  const namespace = process.env.IDGEN_NAMESPACE;
  if (namespace) {
    const r = await idgen.nextIds({ namespace, count: 3 });
    console.log(`namespace ${namespace}: ${r.ids.map(String).join(" ")} (${r.source})`);
  }
} catch (e) {
  if (e instanceof IdgenError) {
    // problem is idgen's code (unauthorized, not_found, …); undefined when
    // no idgen answered.
    console.error(`${e.message} (problem: ${e.problem ?? "no answer from idgen"})`);
    process.exitCode = 1;
  } else {
    throw e;
  }
} finally {
  idgen.close();
}
