package org.khora.tools.neo4j;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.BoltConnectorInternalSettings;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;
import org.neo4j.logging.Level;
import org.neo4j.logging.log4j.Log4jLogProvider;

/**
 * Runs an embedded Neo4j Community DBMS with its Bolt connector, for Khora's tests and
 * local development (the server assembly is not on Maven Central).
 *
 * <p>Options (each also read from the environment variable in brackets):
 * <pre>
 *   --home DIR          Neo4j home; data, transaction logs and logs go below it [KHORA_NEO4J_HOME]
 *   --host HOST         Bolt listen host, default 127.0.0.1                      [KHORA_NEO4J_HOST]
 *   --port N            Bolt port, default 7687                                  [KHORA_NEO4J_PORT]
 *   --pagecache SIZE    page cache, e.g. 512m (default)                          [KHORA_NEO4J_PAGECACHE]
 *   --tx-memory SIZE    cap on memory of all running transactions, default 256m  [KHORA_NEO4J_TX_MEMORY]
 *   --parent-pid PID    shut down when that process is gone (test runners)       [KHORA_NEO4J_PARENT_PID]
 * </pre>
 * The password of user {@code neo4j} comes only from the environment variable
 * {@code KHORA_NEO4J_PASSWORD} (never argv, which other users can read); at least 8 chars.
 *
 * <p>Prints {@code KHORA_NEO4J_READY bolt://HOST:PORT version=X} once Bolt accepts
 * connections with that password, and shuts the DBMS down cleanly on SIGTERM/SIGINT.
 */
public final class Neo4jLauncher {

    static final String READY = "KHORA_NEO4J_READY";

    private Neo4jLauncher() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = parseArgs(argv);
        Path home = Path.of(option(opts, "home", "KHORA_NEO4J_HOME", "neo4j-home")).toAbsolutePath();
        String host = option(opts, "host", "KHORA_NEO4J_HOST", "127.0.0.1");
        int port = Integer.parseInt(option(opts, "port", "KHORA_NEO4J_PORT", "7687"));
        long pageCache = parseSize(option(opts, "pagecache", "KHORA_NEO4J_PAGECACHE", "512m"));
        long txMemory = parseSize(option(opts, "tx-memory", "KHORA_NEO4J_TX_MEMORY", "256m"));
        String parentPid = option(opts, "parent-pid", "KHORA_NEO4J_PARENT_PID", "");
        String password = System.getenv("KHORA_NEO4J_PASSWORD");
        if (password == null || password.length() < 8) {
            fail("set KHORA_NEO4J_PASSWORD (at least 8 characters) to the password for user neo4j");
        }
        Files.createDirectories(home);

        DatabaseManagementService dbms;
        try {
            dbms = new DatabaseManagementServiceBuilder(home)
                    .setUserLogProvider(new Log4jLogProvider(System.out, Level.WARN))
                    .setConfig(BoltConnector.enabled, true)
                    .setConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                    .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                    .setConfig(BoltConnector.server_bolt_telemetry_enabled, false)
                    // Netty's graceful-shutdown defaults add ~10 s to every stop; a test
                    // server has no clients worth waiting for.
                    .setConfig(BoltConnectorInternalSettings.connection_shutdown_wait_time, Duration.ofMillis(500))
                    .setConfig(BoltConnectorInternalSettings.thread_pool_shutdown_wait_time, Duration.ofMillis(500))
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(2))
                    .setConfig(GraphDatabaseSettings.auth_enabled, true)
                    // No phone-home: usage reports off, and their network sender too.
                    .setConfig(GraphDatabaseSettings.udc_enabled, false)
                    .setConfig(GraphDatabaseInternalSettings.udc_network_enabled, false)
                    .setConfig(GraphDatabaseSettings.pagecache_memory, pageCache)
                    .setConfig(GraphDatabaseSettings.memory_transaction_global_max_size, txMemory)
                    // A test/dev store: keep only the newest transaction log file.
                    .setConfig(GraphDatabaseSettings.keep_logical_logs, "keep_none")
                    .setConfig(GraphDatabaseSettings.logical_log_rotation_threshold, ByteUnit.mebiBytes(64))
                    .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                    .build();
        } catch (RuntimeException e) {
            fail("Neo4j did not start in " + home + " on " + host + ":" + port + ": " + rootMessage(e));
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("KHORA_NEO4J_STOPPING");
            System.out.flush();
            try {
                dbms.shutdown();
            } finally {
                System.out.println("KHORA_NEO4J_STOPPED");
                System.out.flush();
                stopped.countDown();
            }
        }, "khora-neo4j-shutdown"));

        try {
            setPassword(dbms, password);
            waitForBolt(host, port, 60_000);
        } catch (RuntimeException | IOException e) {
            System.err.println("ERROR: " + rootMessage(e));
            System.exit(1);
        }
        String version = serverVersion(dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME));
        System.out.println(READY + " bolt://" + host + ":" + port + " version=" + version);
        System.out.flush();

        if (!parentPid.isEmpty()) {
            watchParent(Long.parseLong(parentPid));
        }
        stopped.await();
    }

    /** Sets the neo4j user's password; a restart with the same password is fine. */
    private static void setPassword(DatabaseManagementService dbms, String password) {
        GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
        try {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $pw CHANGE NOT REQUIRED", Map.of("pw", password));
        } catch (RuntimeException e) {
            String message = String.valueOf(rootMessage(e)).toLowerCase(Locale.ROOT);
            if (!message.contains("cannot be the same")) {
                throw e;
            }
        }
    }

    private static String serverVersion(GraphDatabaseService system) {
        return system.executeTransactionally(
                "CALL dbms.components() YIELD versions, edition RETURN versions[0] + ' ' + edition AS v",
                Map.of(),
                result -> String.valueOf(result.next().get("v")).replace(' ', '-'));
    }

    private static void waitForBolt(String host, int port, long timeoutMillis) throws IOException {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        IOException last = null;
        while (System.currentTimeMillis() < deadline) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(host, port), 1000);
                return;
            } catch (IOException e) {
                last = e;
                sleep(100);
            }
        }
        throw new IOException("Bolt did not accept connections on " + host + ":" + port, last);
    }

    /** Test runners may die without stopping us; do not outlive them. */
    private static void watchParent(long pid) {
        Thread watcher = new Thread(() -> {
            Optional<ProcessHandle> parent = ProcessHandle.of(pid);
            while (parent.map(ProcessHandle::isAlive).orElse(false)) {
                sleep(1000);
            }
            System.out.println("KHORA_NEO4J parent process " + pid + " is gone; shutting down");
            System.exit(0);
        }, "khora-neo4j-parent-watch");
        watcher.setDaemon(true);
        watcher.start();
    }

    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String arg = argv[i];
            if (!arg.startsWith("--")) {
                fail("unexpected argument " + arg);
            }
            String key = arg.substring(2);
            String value;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else if (i + 1 < argv.length) {
                value = argv[++i];
            } else {
                fail("missing value for " + arg);
                return opts;
            }
            opts.put(key, value);
        }
        return opts;
    }

    private static String option(Map<String, String> opts, String name, String env, String fallback) {
        String value = opts.get(name);
        if (value == null) {
            value = System.getenv(env);
        }
        return value == null || value.isEmpty() ? fallback : value;
    }

    static long parseSize(String text) {
        String s = text.trim().toLowerCase(Locale.ROOT);
        long unit = 1;
        char last = s.charAt(s.length() - 1);
        if (last == 'k' || last == 'm' || last == 'g') {
            unit = last == 'k' ? ByteUnit.kibiBytes(1) : last == 'm' ? ByteUnit.mebiBytes(1) : ByteUnit.gibiBytes(1);
            s = s.substring(0, s.length() - 1);
        }
        return Long.parseLong(s) * unit;
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        StringBuilder out = new StringBuilder(String.valueOf(e.getMessage()));
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
            out.append(" <- ").append(t.getMessage());
        }
        return out.toString();
    }

    private static void sleep(long millis) {
        try {
            TimeUnit.MILLISECONDS.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void fail(String message) {
        System.err.println("ERROR: " + message);
        System.exit(2);
    }
}
