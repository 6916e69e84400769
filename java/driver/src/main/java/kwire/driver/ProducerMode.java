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
 * records (0: until stopped), size (value bytes), acks ("0", "1", "all"),
 * idempotent (false unless set: the 4.x default is true, which needs
 * acks=all), linger_ms, interval_ms (a pause after each send, so that a
 * producer keeps writing while the parent kills a broker), progress_every
 * (every that many acknowledgements, a {@code progress} report), report_acked
 * (the {@code produced} report lists which record got which offset), stay
 * (after sending, stay until stopped). Record i has key "k"+i.
 *
 * <p>Reports: {@code produced} per partition (acked records, errors, first
 * and last offset; acks=0 gets offset -1 back; with report_acked,
 * {@code acked}: runs [first key index, first offset, count] of records
 * acknowledged at consecutive offsets), {@code progress} (acked so far),
 * ready after the first record was acknowledged.
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
        int interval = Main.num(a, "interval_ms", 0), every = Main.num(a, "progress_every", 0);
        boolean perRecord = Main.bool(a, "report_acked", false);
        Map<Integer, Tally> tallies = new TreeMap<>();
        long[] acked = {0};
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(t, a, clientId))) {
            for (int i = 0; (n == 0 || i < n) && !t.stopped(); i++) {
                ProducerRecord<byte[], byte[]> r = record(topic, partition, i, size);
                int key = i;
                p.send(r, (md, err) -> {
                    long sofar;
                    synchronized (tallies) {
                        int part = md != null ? md.partition() : r.partition() == null ? -1 : r.partition();
                        Tally y = tallies.computeIfAbsent(part, x -> new Tally(perRecord));
                        y.add(md, err);
                        if (err == null && md.hasOffset()) {
                            y.acked(key, md.offset());
                        }
                        sofar = err == null ? ++acked[0] : acked[0];
                    }
                    if (err == null) {
                        t.out.ready();
                        if (every > 0 && sofar % every == 0) {
                            ObjectNode o = t.out.report("progress");
                            o.put("client_id", clientId);
                            o.put("acked", sofar);
                            t.out.send(o);
                        }
                    }
                });
                if (interval > 0) {
                    t.await(java.time.Duration.ofMillis(interval));
                }
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
        /** runs of records acknowledged at consecutive offsets: [first key, first offset, count]; null unless asked. */
        final java.util.List<long[]> runs;

        Tally(boolean perRecord) {
            runs = perRecord ? new java.util.ArrayList<>() : null;
        }

        /** acked records that record key got offset off. */
        void acked(int key, long off) {
            if (runs == null) {
                return;
            }
            long[] r = runs.isEmpty() ? null : runs.get(runs.size() - 1);
            if (r != null && r[0] + r[2] == key && r[1] + r[2] == off) {
                r[2]++;
            } else {
                runs.add(new long[] {key, off, 1});
            }
        }

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
            if (runs != null) {
                var a = o.putArray("acked");
                runs.forEach(r -> a.addArray().add(r[0]).add(r[1]).add(r[2]));
            }
        }
    }
}
