package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Timer;
import java.util.TimerTask;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Task is what the parent asked for: internal/gen's childSpec (brokers,
 * args, deadline) plus the mode, and the stop signal every mode obeys.
 */
final class Task {
    final String mode;
    final List<String> brokers = new ArrayList<>();
    final JsonNode args;
    final Out out;
    private final CountDownLatch stop = new CountDownLatch(1);
    private final List<Runnable> onStop = new ArrayList<>();
    private final Timer timer = new Timer("kwire-deadline", true);

    private Task(String mode, JsonNode spec, Out out) {
        this.mode = mode;
        this.out = out;
        spec.path("brokers").forEach(b -> brokers.add(b.asText()));
        if (brokers.isEmpty()) {
            throw new IllegalArgumentException("no brokers in the task");
        }
        JsonNode a = spec.get("args");
        this.args = a == null || a.isNull() ? Out.JSON.createObjectNode() : a;
    }

    static Task parse(String mode, String raw, Out out) throws Exception {
        if (raw == null || raw.isEmpty()) {
            throw new IllegalArgumentException("no task: set KWIRE_GEN_CHILD or pass it as the second argument");
        }
        JsonNode spec = Out.JSON.readTree(raw);
        Task t = new Task(mode, spec, out);
        String deadline = Main.str(spec, "deadline", "");
        if (!deadline.isEmpty() && !deadline.startsWith("0001-")) {
            long ms = Duration.between(Instant.now(), Instant.parse(deadline)).toMillis();
            t.timer.schedule(new TimerTask() {
                @Override
                public void run() {
                    t.stop();
                }
            }, Math.max(ms, 0));
        }
        return t;
    }

    /** bootstrap is bootstrap.servers. */
    String bootstrap() {
        return String.join(",", brokers);
    }

    /** props starts a client configuration with the bootstrap servers and client.id. */
    Properties props(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap());
        if (clientId != null && !clientId.isEmpty()) {
            p.put("client.id", clientId);
        }
        return p;
    }

    /** onStop registers fn (e.g. consumer::wakeup) to run when the task is stopped. */
    synchronized void onStop(Runnable fn) {
        if (stopped()) {
            fn.run();
            return;
        }
        onStop.add(fn);
    }

    /** stop ends the task (SIGTERM or the deadline). */
    void stop() {
        List<Runnable> fns;
        synchronized (this) {
            if (stopped()) {
                return;
            }
            stop.countDown();
            fns = new ArrayList<>(onStop);
        }
        fns.forEach(Runnable::run);
    }

    boolean stopped() {
        return stop.getCount() == 0;
    }

    /** await waits until the task is stopped or d has passed; it returns stopped(). */
    boolean await(Duration d) throws InterruptedException {
        return stop.await(d.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** awaitStop waits until the task is stopped. */
    void awaitStop() throws InterruptedException {
        stop.await();
    }

    void cancelDeadline() {
        timer.cancel();
    }
}
