package io.kvgate.dataplane.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.admin.AdminApi;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The doctor's query refusals (OpenAI error objects naming the field, value and rule) and an empty table's report. */
class DoctorRoutesTest {
    private final Doctor doctor = new Doctor(List::of, () -> null, null, null, null);

    @Test
    void aTimeoutOutOfRangeOrNotANumberIsRefusedByName() {
        for (String bad : new String[] {"5", "60001", "soon"}) {
            AdminApi.Reply r = DoctorRoutes.report(doctor, "timeout_ms=" + bad);
            assertEquals(400, r.status(), r.body());
            assertTrue(r.body().contains("timeout_ms=" + bad + ": must be an integer in [100, 60000]"), r.body());
            assertTrue(r.body().contains("\"param\":\"timeout_ms\""), r.body());
        }
    }

    @Test
    void anUnknownRuleIs404() {
        AdminApi.Reply r = DoctorRoutes.report(doctor, "rule=nope");
        assertEquals(404, r.status(), r.body());
        assertTrue(r.body().contains("no rule named 'nope'"), r.body());
    }

    @Test
    void nothingToCheckIsOk() {
        AdminApi.Reply r = DoctorRoutes.report(doctor, "");
        assertEquals(200, r.status(), r.body());
        assertTrue(r.body().contains("\"ok\" : true") && r.body().contains("\"mismatches\" : 0"), r.body());
    }
}
