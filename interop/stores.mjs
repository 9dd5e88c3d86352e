// Opening one published @mastra/* store from a plain spec: shared by driver.mjs (the interop tests) and
// mastra-store.mjs (the conformance suite's wire-protocol shim).
//
// spec.kind: "pg" {connectionString, schemaName?}, "libsql" {url}, "upstash" {url, token},
// "mongodb" {url, dbName}, "oracle" {user, password, connectString}; "none" opens no store.

export async function openStore(spec) {
  const id = "workmem-interop";
  switch (spec.kind) {
    case "none":
      return null;
    case "pg": {
      const { PostgresStore } = await import("@mastra/pg");
      return new PostgresStore({ id, connectionString: spec.connectionString, schemaName: spec.schemaName });
    }
    case "libsql": {
      const { LibSQLStore } = await import("@mastra/libsql");
      return new LibSQLStore({ id, url: spec.url });
    }
    case "upstash": {
      const { UpstashStore } = await import("@mastra/upstash");
      return new UpstashStore({ id, url: spec.url, token: spec.token });
    }
    case "mongodb": {
      const { MongoDBStore } = await import("@mastra/mongodb");
      return new MongoDBStore({ id, url: spec.url, dbName: spec.dbName });
    }
    case "oracle": {
      const { OracleStore } = await import("@mastra/oracledb");
      return new OracleStore({ id, user: spec.user, password: spec.password, connectString: spec.connectString });
    }
    default:
      throw new Error(`unknown store kind ${spec.kind}`);
  }
}
