package kwire.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Mode "producer": a KafkaProducer writing records, then closing.
 *
 * <p>Args: client_id, topic, partition (-1: the default partitioner, by key),
 * records, size (value bytes), acks ("0", "1", "all"), idempotent (false
 * unless set: the 4.x default is true, which needs acks=all), linger_ms,
 * stay (after sending, stay until stopped).
 *
 * <p>Reports: {@code produced} per partition (acked records, errors, first
 * and last offset; acks=0 gets offset -1 back), ready after the first record
 * was acknowledged.
 */
final class ProducerMode {
    private ProducerMode() {}

    static Properties props(Task t, JsonNode a, String clientId) {
        Properties p = t.props(clientId);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", Main.str(a, "acks", "all"));
        p.put("enable.idempotence", Boolean.toString(Main.bool(a, "idempotent", false)));
        p.put("linger.ms", Integer.toString(Main.num(a, "linger_ms", 5)));
        return p;
    }

    static ProducerRecord<byte[], byte[]> record(String topic, int partition, int i, int size) {
        byte[] v = new byte[Math.max(size, 1)];
        Arrays.fill(v, (byte) ('a' + i % 26));
        byte[] k = ("k" + i).getBytes(StandardCharsets.UTF_8);
        return new ProducerRecord<>(topic, partition < 0 ? null : partition, k, v);
    }

    static void run(Task t) throws Exception {
        JsonNode a = t.args;
        String clientId = Main.str(a, "client_id", "kwire-java-producer");
        String topic = Main.str(a, "topic", "");
        int partition = Main.num(a, "partition", -1), n = Main.num(a, "records", 10), size = Main.num(a, "size", 100);
        Map<Integer, Tally> tallies = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(t, a, clientId))) {
            for (int i = 0; i < n && !t.stopped(); i++) {
                ProducerRecord<byte[], byte[]> r = record(topic, partition, i, size);
                p.send(r, (md, err) -> {
                    synchronized (tallies) {
                        int part = md != null ? md.partition() : r.partition() == null ? -1 : r.partition();
                        tallies.computeIfAbsent(part, x -> new Tally()).add(md, err);
                    }
                    if (err == null) {
                        t.out.ready();
                    }
                });
            }
            p.flush();
            synchronized (tallies) {
                tallies.forEach((part, y) -> {
                    ObjectNode o = t.out.report("produced");
                    o.put("client_id", clientId);
                    o.put("topic", topic);
                    o.put("partition", part);
                    o.put("acks", Main.str(a, "acks", "all"));
                    y.put(o);
                    t.out.send(o);
                });
            }
            if (Main.bool(a, "stay", false)) {
                t.awaitStop();
            }
        }
    }

    /** Tally counts one partition's acknowledgements. */
    static final class Tally {
        long records, errors, first = -1, last = -1;
        String error;

        void add(RecordMetadata md, Exception err) {
            if (err != null) {
                errors++;
                error = Out.error(err);
                return;
            }
            records++;
            if (md.hasOffset()) {
                first = first < 0 ? md.offset() : Math.min(first, md.offset());
                last = Math.max(last, md.offset());
            }
        }

        void put(ObjectNode o) {
            o.put("records", records);
            o.put("errors", errors);
            o.put("first_offset", first);
            o.put("last_offset", last);
            if (error != null) {
                o.put("error", error);
            }
        }
    }
}
