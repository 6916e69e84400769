package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.TreeMap;

/**
 * The kwire Java driver: runs one Apache Kafka Java client in this JVM,
 * steered by internal/gen (child_java.go) like the Go children.
 *
 * <p>Usage: {@code java -cp target/kwire-driver.jar:target/lib/* kwire.driver.Main MODE},
 * with the task in the environment variable KWIRE_GEN_CHILD (internal/gen's
 * childSpec: brokers, args, deadline) or, for trying it by hand, as the
 * second argument. The driver prints {@code ready} on stdout once the client is
 * up (each mode says what that means), then one JSON object a line: the
 * reports (groupReport in internal/gen). Logs go to stderr. SIGTERM (or the
 * deadline) closes the client gracefully; SIGKILL and SIGSTOP are the parent's
 * to send. Exit code 0, 1 on a failed task, 2 on a bad invocation.
 */
public final class Main {
    /** A mode runs one client until it is done or the task is stopped. */
    interface Mode {
        void run(Task task) throws Exception;
    }

    /**
     * MODES maps each mode to its class, which has {@code static void
     * run(Task)}. They are looked up by name: the Kafka 3 build (pom.xml,
     * profile kafka3: the 3.9 clients) leaves out the classes that need the
     * 4.x clients (admin, share, streams), and says so when one is asked for.
     */
    static final Map<String, String> MODES = new TreeMap<>(Map.of(
            "consumer", "ConsumerMode",
            "share", "ShareMode",
            "producer", "ProducerMode",
            "txn", "TxnMode",
            "ctp", "CtpMode",
            "streams", "StreamsMode",
            "admin", "AdminMode",
            "churn", "ChurnMode"));

    /** mode returns the mode's run method, null when this build leaves its class out. */
    static Mode mode(String name) {
        Method run;
        try {
            run = Class.forName(Main.class.getPackageName() + "." + MODES.get(name)).getDeclaredMethod("run", Task.class);
        } catch (ReflectiveOperationException e) {
            return null;
        }
        return task -> {
            try {
                run.invoke(null, task);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof Exception x) {
                    throw x;
                }
                throw (Error) e.getCause();
            }
        };
    }

    /** finished is set when main is done: the shutdown hook has nothing to wait for. */
    private static volatile boolean finished;
    /** shuttingDown is set by the shutdown hook (SIGTERM): System.exit would block. */
    private static volatile boolean shuttingDown;
    private static volatile int exitCode;

    private Main() {}

    public static void main(String[] argv) {
        PrintStream stdout = System.out;
        // Kafka's tools print to System.out: keep stdout for the protocol.
        System.setOut(System.err);
        Out out = new Out(stdout);
        if (argv.length < 1 || !MODES.containsKey(argv[0])) {
            System.err.println("usage: kwire.driver.Main MODE [TASK-JSON] (modes: " + String.join(", ", MODES.keySet())
                    + "); the task comes from $KWIRE_GEN_CHILD otherwise");
            System.exit(2);
        }
        Mode mode = mode(argv[0]);
        if (mode == null) {
            System.err.println("kwire-driver " + argv[0] + ": not in this build (the 3.9 clients', pom.xml profile kafka3):"
                    + " the mode needs the 4.x clients of the default build, java/driver/target");
            System.exit(2);
        }
        String raw = argv.length > 1 ? argv[1] : System.getenv("KWIRE_GEN_CHILD");
        Task task;
        try {
            task = Task.parse(argv[0], raw, out);
        } catch (Exception e) {
            System.err.println("kwire-driver " + argv[0] + ": bad task: " + e);
            System.exit(2);
            return;
        }
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (finished) {
                return; // main itself is exiting
            }
            shuttingDown = true;
            task.stop();
            try {
                main.join(20_000); // let the mode close its client (LeaveGroup, abort)
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
            stdout.flush();
            // Asked to stop and stopped: exit 0 (not 143), as the Go children do.
            Runtime.getRuntime().halt(main.isAlive() ? 1 : exitCode);
        }, "kwire-stop"));
        int code = 0;
        try {
            mode.run(task);
        } catch (Throwable e) {
            if (!task.stopped()) {
                System.err.println("kwire-driver " + argv[0] + ": " + e);
                e.printStackTrace(System.err);
                code = 1;
            }
        } finally {
            task.cancelDeadline();
        }
        stdout.flush();
        exitCode = code;
        finished = true;
        if (!shuttingDown) {
            System.exit(code); // a shutdown in progress (SIGTERM) exits by itself
        }
    }

    /** Reads a string field, or def. */
    static String str(JsonNode n, String field, String def) {
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? def : v.asText();
    }

    /** Reads an int field, or def. */
    static int num(JsonNode n, String field, int def) {
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? def : v.asInt();
    }

    /** Reads a boolean field, or def. */
    static boolean bool(JsonNode n, String field, boolean def) {
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? def : v.asBoolean();
    }
}
