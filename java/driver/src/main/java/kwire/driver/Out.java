package kwire.driver;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintStream;
import java.time.Instant;
import java.util.Collection;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.common.TopicPartition;

/**
 * Out writes the driver's protocol on stdout: {@code ready}, then one JSON
 * report a line, each written and flushed whole at once, so that a driver
 * SIGKILLed later has reported everything up to its death.
 */
final class Out {
    static final ObjectMapper JSON = new ObjectMapper();
    private final PrintStream w;
    private boolean ready;

    Out(PrintStream w) {
        this.w = w;
    }

    /** ready tells the parent the client is up; only the first call counts. */
    synchronized void ready() {
        if (!ready) {
            ready = true;
            w.print("ready\n");
            w.flush();
        }
    }

    /** report starts a report of kind (groupReport.Kind). */
    ObjectNode report(String kind) {
        ObjectNode n = JSON.createObjectNode();
        n.put("kind", kind);
        return n;
    }

    /** send stamps n with the wall clock (groupReport.Nanos) and writes it. */
    void send(ObjectNode n) {
        Instant now = Instant.now();
        n.put("ns", now.getEpochSecond() * 1_000_000_000L + now.getNano());
        String line;
        try {
            line = JSON.writeValueAsString(n);
        } catch (Exception e) {
            throw new IllegalStateException("report: " + e, e);
        }
        synchronized (this) {
            w.print(line + "\n");
            w.flush();
        }
    }

    /** note sends a free-text note (groupReport kind note). */
    void note(String text) {
        ObjectNode n = report("note");
        n.put("text", text);
        send(n);
    }

    /** assignment is topic -> sorted partitions, as groupReport.Assignment. */
    static ObjectNode assignment(Collection<TopicPartition> tps) {
        Map<String, TreeSet<Integer>> m = new TreeMap<>();
        for (TopicPartition tp : tps) {
            m.computeIfAbsent(tp.topic(), t -> new TreeSet<>()).add(tp.partition());
        }
        ObjectNode n = JSON.createObjectNode();
        m.forEach((t, ps) -> {
            var a = n.putArray(t);
            ps.forEach(a::add);
        });
        return n;
    }

    /** offsets is topic -> partition -> offset. */
    static ObjectNode offsets(Map<TopicPartition, Long> o) {
        ObjectNode n = JSON.createObjectNode();
        o.forEach((tp, off) -> {
            ObjectNode t = n.has(tp.topic()) ? (ObjectNode) n.get(tp.topic()) : n.putObject(tp.topic());
            t.put(Integer.toString(tp.partition()), off);
        });
        return n;
    }

    /** error names an exception for a report: its class and message. */
    static String error(Throwable e) {
        while (e.getCause() != null && (e instanceof java.util.concurrent.ExecutionException
                || e instanceof java.util.concurrent.CompletionException)) {
            e = e.getCause();
        }
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }
}
