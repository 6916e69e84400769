package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Mode "churn": field report 2's application that makes a new client for
 * every piece of work, each with a new client.id (Kafka's generated
 * {@code producer-N}, and {@code consumer-null-N} for a consumer without
 * group.id, unless client_id_prefix is given): per request, a new
 * KafkaProducer writes one record and closes (acks=all), then a new
 * KafkaConsumer (no group: assign and seek) reads it back and closes.
 *
 * <p>Args: requests, topic, partition (default 0), client_id_prefix (ids
 * prefix-p-N and prefix-c-N instead of the generated ones), consumers (false:
 * producers only).
 *
 * <p>Reports: {@code client} for every client made (role producer or
 * consumer, client_id as the client used it, offset written or read), ready
 * after the first request.
 */
final class ChurnMode {
    private ChurnMode() {}

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        String topic = Main.str(a, "topic", ""), prefix = Main.str(a, "client_id_prefix", "");
        int n = Main.num(a, "requests", 10), partition = Main.num(a, "partition", 0);
        boolean consumers = Main.bool(a, "consumers", true);
        TopicPartition tp = new TopicPartition(topic, partition);
        for (int i = 0; i < n && !t.stopped(); i++) {
            Properties pp = ProducerMode.props(t, a, prefix.isEmpty() ? null : prefix + "-p-" + (i + 1));
            long off;
            String id;
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
                id = clientId(p.metrics());
                RecordMetadata md = p.send(ProducerMode.record(topic, partition, i, 20)).get();
                off = md.offset();
            }
            report(t, "producer", id, off);
            if (consumers) {
                Properties cp = t.props(prefix.isEmpty() ? null : prefix + "-c-" + (i + 1));
                cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
                cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
                cp.put("enable.auto.commit", "false");
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
                    id = clientId(c.metrics());
                    c.assign(List.of(tp));
                    c.seek(tp, off);
                    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                    long got = -1;
                    while (got < 0 && System.nanoTime() < deadline && !t.stopped()) {
                        ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                        for (var r : rs.records(tp)) {
                            got = r.offset();
                            break;
                        }
                    }
                    if (got < 0) {
                        throw new IllegalStateException(id + " read nothing at " + tp + " offset " + off);
                    }
                    report(t, "consumer", id, got);
                }
            }
            t.out.ready();
        }
    }

    /** clientId is the client.id a client uses (a generated one too): its metrics' client-id tag. */
    static String clientId(Map<MetricName, ? extends Metric> metrics) {
        for (MetricName m : metrics.keySet()) {
            String id = m.tags().get("client-id");
            if (id != null) {
                return id;
            }
        }
        throw new IllegalStateException("no client-id tag in the client's metrics");
    }

    private static void report(Task t, String role, String id, long off) {
        ObjectNode o = t.out.report("client");
        o.put("role", role);
        o.put("client_id", id);
        o.put("offset", off);
        t.out.send(o);
    }
}
