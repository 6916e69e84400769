package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;

/**
 * Mode "streams": a Kafka Streams application (application.id = group)
 * copying input to output with a stateless map, on the classic protocol
 * (the streams partition assignor over JoinGroup/SyncGroup) or, with
 * group_protocol "streams", KIP-1071's StreamsGroupHeartbeat.
 *
 * <p>Args: group (application.id), client_id, input, output, group_protocol
 * (classic|streams), threads, processing_guarantee (at_least_once|exactly_once_v2),
 * commit_interval_ms, session_timeout_ms (classic only).
 *
 * <p>Reports: {@code streams_state} for every state change, {@code streams_tasks}
 * (per stream thread: consumer client id and active tasks with their
 * partitions) whenever the application becomes RUNNING, {@code streams_error}
 * for an uncaught exception, {@code streams_processed} (records processed, at
 * close). Reports name the application in application_id, not group: the
 * groups truth (internal/gen) holds consumer groups.
 * Ready: the first RUNNING.
 */
final class StreamsMode {
    private StreamsMode() {}

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        String app = Main.str(a, "group", "kwire-java-streams");
        String clientId = Main.str(a, "client_id", app);
        Path state = Files.createTempDirectory("kwire-streams-");
        Properties p = t.props(clientId);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class.getName());
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.toString(Main.num(a, "threads", 1)));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.toString(Main.num(a, "commit_interval_ms", 1000)));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, Main.str(a, "processing_guarantee", "at_least_once"));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, Main.str(a, "group_protocol", "classic"));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (a.hasNonNull("session_timeout_ms")) {
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), a.get("session_timeout_ms").asText());
        }
        AtomicLong processed = new AtomicLong();
        StreamsBuilder b = new StreamsBuilder();
        b.<byte[], byte[]>stream(Main.str(a, "input", "")).peek((k, v) -> processed.incrementAndGet())
                .mapValues(v -> v).to(Main.str(a, "output", ""));
        try (KafkaStreams ks = new KafkaStreams(b.build(), p)) {
            ks.setStateListener((to, from) -> {
                ObjectNode n = report(t, "streams_state", app, clientId);
                n.put("from", from.toString());
                n.put("to", to.toString());
                t.out.send(n);
                if (to == KafkaStreams.State.RUNNING) {
                    tasks(t, ks, app, clientId);
                    t.out.ready();
                }
            });
            ks.setUncaughtExceptionHandler(e -> {
                ObjectNode n = report(t, "streams_error", app, clientId);
                n.put("error", Out.error(e));
                t.out.send(n);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            ks.start();
            while (!t.await(Duration.ofMillis(200))) {
                if (ks.state() == KafkaStreams.State.ERROR || ks.state() == KafkaStreams.State.NOT_RUNNING) {
                    throw new IllegalStateException("streams application stopped: " + ks.state());
                }
            }
            ks.close(Duration.ofSeconds(10));
        } finally {
            ObjectNode n = report(t, "streams_processed", app, clientId);
            n.put("topic", Main.str(a, "input", ""));
            n.put("records", processed.get());
            t.out.send(n);
        }
    }

    static ObjectNode report(Task t, String kind, String group, String clientId) {
        ObjectNode n = t.out.report(kind);
        n.put("application_id", group); // not "group": the groups truth is of consumer groups
        n.put("client_id", clientId);
        return n;
    }

    private static void tasks(Task t, KafkaStreams ks, String app, String clientId) {
        ObjectNode n = report(t, "streams_tasks", app, clientId);
        ArrayNode threads = n.putArray("threads");
        for (ThreadMetadata tm : ks.metadataForLocalThreads()) {
            ObjectNode th = threads.addObject();
            th.put("thread", tm.threadName());
            th.put("consumer_client_id", tm.consumerClientId());
            ObjectNode at = th.putObject("active");
            for (TaskMetadata task : tm.activeTasks()) {
                at.set(task.taskId().toString(), Out.assignment(task.topicPartitions()));
            }
        }
        t.out.send(n);
    }
}
